--- A quick fix through Neovim's own UI: on running_mean.py's
--- `self.mean = 0.9 * self.mean + 0.1 * x` (banned-mutation/tensor-attribute),
--- `vim.lsp.buf.code_action()` (what `gra` runs) offers the server's quickfix, the
--- user picks it in vim.ui.select, Neovim applies its WorkspaceEdit, the buffer is
--- exported again and the diagnostic is gone. The fixed file is saved so that pytest
--- checks it with the CLI too.

local lsp = require('exportlens_test.lsp')

local CODE = 'banned-mutation/tensor-attribute'

local function codes(buf)
  return vim.tbl_map(function(d)
    return d.code
  end, lsp.diagnostics(buf))
end

return function(T)
  local buf = lsp.open(T, 'running_mean.py')
  lsp.client(T, buf)
  local before = lsp.wait_current(T, buf, lsp.FIRST_EXPORT_MS)
  T.need('running_mean.py was exported', before ~= nil, T.events.publishes)
  local line = lsp.line_of(buf, 'self.mean = 0.9 * self.mean + 0.1 * x')
  T.need('the diagnostic ' .. CODE .. ' is on the assignment', #vim.tbl_filter(function(d)
    return d.code == CODE and d.lnum == line
  end, before) == 1, before)

  -- What the user does: cursor on the line, code action, pick the quick fix.
  vim.api.nvim_win_set_cursor(0, { line + 1, 8 })
  local offered, chosen = {}, nil
  local select = vim.ui.select
  vim.ui.select = function(items, opts, on_choice)
    for _, item in ipairs(items) do
      local action = item.action
      offered[#offered + 1] = { title = action.title, kind = action.kind, preferred = action.isPreferred }
      if chosen == nil and action.kind == 'quickfix' and action.title:find('as a buffer', 1, true) then
        chosen = item
      end
    end
    vim.ui.select = select
    on_choice(chosen)
  end
  local version = lsp.version(buf)
  vim.lsp.buf.code_action({ context = { only = { 'quickfix' } } })
  local applied = T.wait(lsp.REQUEST_MS, function()
    return lsp.version(buf) > version
  end)
  vim.ui.select = select
  T.check('vim.lsp.buf.code_action() offers a preferred quick fix registering `mean` as a buffer', chosen ~= nil
    and chosen.action.isPreferred == true and chosen.action.title:find('`mean`', 1, true) ~= nil, offered)
  local registered
  for i, text in ipairs(vim.api.nvim_buf_get_lines(buf, 0, -1, false)) do
    if text:find([[self%.register_buffer%(['"]mean['"], torch%.zeros%(3%)]]) then
      registered = i - 1
    end
  end
  T.need('choosing it edits the buffer: register_buffer of mean in __init__', applied and registered ~= nil
    and registered < lsp.line_of(buf, 'def forward('), {
    offered = offered,
    text = vim.api.nvim_buf_get_lines(buf, 0, -1, false),
  })

  -- The edited text is exported again: the diagnostic is gone, nothing new is wrong.
  local after = lsp.wait_current(T, buf, lsp.EXPORT_MS)
  T.need('the fixed buffer was exported again', after ~= nil, T.events.publishes)
  T.check('after the quick fix and the re-export, ' .. CODE .. ' is gone', not vim.tbl_contains(codes(buf), CODE), {
    diagnostics = after,
    text = vim.api.nvim_buf_get_lines(buf, 0, -1, false),
  })
  T.check('…and no error took its place', #vim.tbl_filter(function(d)
    return d.severity == vim.diagnostic.severity.ERROR
  end, after) == 0, after)
  T.check('no quick fix is offered on that line any more', (function()
    local params = vim.lsp.util.make_range_params(0, 'utf-16')
    params.context = { diagnostics = {}, only = { 'quickfix' } }
    local responses = vim.lsp.buf_request_sync(buf, 'textDocument/codeAction', params, lsp.REQUEST_MS) or {}
    for _, r in pairs(responses) do
      for _, action in ipairs(r.result or {}) do
        if action.title:find('as a buffer', 1, true) then
          return false
        end
      end
    end
    return true
  end)())
  vim.cmd('silent write')
  T.check('the fixed file is saved for the CLI check', not vim.bo[buf].modified)
end
