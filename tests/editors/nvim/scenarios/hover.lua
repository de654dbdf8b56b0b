--- Hovers in counter.py through the real client: the `x` of `def forward(self, x)`
--- shows its InputSpec (USER_INPUT), the class line the signature table, and
--- `vim.lsp.buf.hover()` (what `K` runs) opens a floating window showing it.

local lsp = require('exportlens_test.lsp')

local function floats()
  local found = {}
  for _, w in ipairs(vim.api.nvim_list_wins()) do
    if vim.api.nvim_win_get_config(w).relative ~= '' then
      found[#found + 1] = w
    end
  end
  return found
end

return function(T)
  local buf = lsp.open(T, 'counter.py')
  lsp.client(T, buf)
  T.need('counter.py was exported', lsp.wait_current(T, buf, lsp.FIRST_EXPORT_MS) ~= nil, T.events.publishes)

  local forward = lsp.line_of(buf, 'def forward(self, x):')
  T.need('counter.py has `def forward(self, x):`', forward ~= nil)
  local line = vim.api.nvim_buf_get_lines(buf, forward, forward + 1, false)[1]
  local x_col = assert(line:find('x)', 1, true)) - 1
  local markdown, response = lsp.hover_text(buf, forward, x_col)
  T.check('hover on the forward argument `x` shows USER_INPUT', markdown ~= nil and markdown:find('USER_INPUT', 1, true) ~= nil, response)
  T.check('that hover names the argument and its shape', markdown ~= nil and markdown:find('x', 1, true) ~= nil and markdown:find('[3]', 1, true) ~= nil, markdown)
  local range = type(response.result) == 'table' and response.result.range or nil
  T.check('that hover covers exactly `x`', range ~= nil and range.start.line == forward and range.start.character == x_col and range['end'].character == x_col + 1, range)

  local class_line = lsp.line_of(buf, 'class Counter(')
  T.need('counter.py has `class Counter(`', class_line ~= nil)
  local table_md = lsp.hover_text(buf, class_line, 7)
  T.check('hover on the class line shows the signature table', table_md ~= nil
    and table_md:find('# inputs', 1, true) ~= nil
    and table_md:find('USER_INPUT', 1, true) ~= nil
    and table_md:find('BUFFER_MUTATION', 1, true) ~= nil, table_md)

  local buffer_line = lsp.line_of(buf, 'register_buffer("steps"')
  T.need('counter.py registers the `steps` buffer', buffer_line ~= nil)
  local steps_col = assert(vim.api.nvim_buf_get_lines(buf, buffer_line, buffer_line + 1, false)[1]:find('"steps"', 1, true))
  local buffer_md = lsp.hover_text(buf, buffer_line, steps_col)
  T.check('hover on the `register_buffer("steps"` literal shows its BUFFER spec', buffer_md ~= nil
    and buffer_md:find('BUFFER', 1, true) ~= nil
    and buffer_md:find('steps', 1, true) ~= nil, buffer_md)

  -- A position with nothing to say: no hover (nil result), not an error.
  local blank = lsp.line_of(buf, 'import torch')
  local none, none_response = lsp.hover_text(buf, blank, 0)
  T.check('no hover on `import torch`', none == nil and none_response.err == nil, none_response)

  -- What `K` does: the float shows the same markdown.
  vim.api.nvim_win_set_cursor(0, { forward + 1, x_col })
  vim.lsp.buf.hover()
  local float = T.wait(lsp.REQUEST_MS, function()
    for _, w in ipairs(floats()) do
      local text = table.concat(vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(w), 0, -1, false), '\n')
      if text:find('USER_INPUT', 1, true) then
        return w
      end
    end
  end)
  T.check('vim.lsp.buf.hover() opens a float showing USER_INPUT', float ~= nil, vim.tbl_map(function(w)
    return vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(w), 0, -1, false)
  end, floats()))
  if float then
    T.check('the hover float renders markdown', vim.bo[vim.api.nvim_win_get_buf(float)].filetype == 'markdown', vim.bo[vim.api.nvim_win_get_buf(float)].filetype)
  end

  -- After an edit above, once the new version is exported, `x` hovers at its new line.
  vim.api.nvim_buf_set_lines(buf, 0, 0, false, { '# a comment added at the top' })
  T.need('the edited counter.py was exported', lsp.wait_current(T, buf, lsp.EXPORT_MS) ~= nil, T.events.publishes)
  local moved, moved_response = lsp.hover_text(buf, forward + 1, x_col)
  T.check('after an edit above, hover on the moved `x` shows USER_INPUT', moved ~= nil and moved:find('USER_INPUT', 1, true) ~= nil, moved_response)
end
