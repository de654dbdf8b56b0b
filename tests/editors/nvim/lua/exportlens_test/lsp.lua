--- Helpers the scenarios share: open a project file, find its client, compare
--- diagnostics with the CLI's, locate lines by their text.

local M = {}

-- The first export waits for the worker's warm-up (torch import) on a shared machine.
M.FIRST_EXPORT_MS = 150000
M.EXPORT_MS = 90000
M.REQUEST_MS = 15000

--- Open `name` from the test project; its buffer number.
---@param T table the harness
---@param name string
---@return integer
function M.open(T, name)
  vim.cmd.edit(vim.fn.fnameescape(vim.fs.joinpath(T.env('EXPORTLENS_NVIM_PROJECT'), name)))
  return vim.api.nvim_get_current_buf()
end

--- Wait for the exportlens client to attach to `buf` and finish initializing.
---@param T table
---@param buf integer
---@return vim.lsp.Client
function M.client(T, buf)
  local client = T.wait(M.REQUEST_MS * 2, function()
    local c = vim.lsp.get_clients({ bufnr = buf, name = 'exportlens' })[1]
    return c and c.initialized and c or nil
  end)
  T.need('the exportlens client attaches to ' .. vim.fn.fnamemodify(vim.api.nvim_buf_get_name(buf), ':t'), client ~= nil, {
    clients = vim.tbl_map(function(c)
      return { name = c.name, initialized = c.initialized }
    end, vim.lsp.get_clients()),
  })
  return client
end

--- 0-based index of the first line of `buf` containing `needle` (plain text), or nil.
---@param buf integer
---@param needle string
---@return integer?
function M.line_of(buf, needle)
  for i, line in ipairs(vim.api.nvim_buf_get_lines(buf, 0, -1, false)) do
    if line:find(needle, 1, true) then
      return i - 1
    end
  end
  return nil
end

--- The buffer's diagnostics from exportlens, as comparable plain tables, sorted.
---@param buf integer
---@return table[]
function M.diagnostics(buf)
  local out = {}
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    if d.source == 'exportlens' then
      out[#out + 1] = {
        code = d.code,
        severity = d.severity,
        lnum = d.lnum,
        col = d.col,
        end_lnum = d.end_lnum,
        end_col = d.end_col,
        message = d.message,
      }
    end
  end
  table.sort(out, function(a, b)
    if a.lnum ~= b.lnum then
      return a.lnum < b.lnum
    end
    if a.col ~= b.col then
      return a.col < b.col
    end
    return a.code < b.code
  end)
  return out
end

--- `{code@line}` summary of diagnostics, for messages and simple comparisons.
---@param items table[]
---@return string[]
function M.summary(items)
  return vim.tbl_map(function(d)
    return ('%s@%d'):format(d.code, d.lnum)
  end, items)
end

--- The version the client last sent for `buf` (what a publish must carry).
---@param buf integer
---@return integer
function M.version(buf)
  return vim.lsp.util.buf_versions[buf]
end

--- The last publishDiagnostics the client handled for `buf`, or nil.
---@param T table
---@param buf integer
---@return table?
function M.last_publish(T, buf)
  local uri = vim.uri_from_bufnr(buf)
  local last
  for _, p in ipairs(T.events.publishes) do
    if p.uri == uri then
      last = p
    end
  end
  return last
end

--- Wait until the client handled a publish for the buffer's current version; the
--- diagnostics shown then (or nil after `ms`). The version is what tells a result
--- for this text from an older one, so nothing else needs to match.
---@param T table
---@param buf integer
---@param ms integer
---@return table[]?
function M.wait_current(T, buf, ms)
  return T.wait(ms, function()
    local last = M.last_publish(T, buf)
    if last == nil or last.version ~= M.version(buf) then
      return nil
    end
    return M.diagnostics(buf)
  end)
end

--- The hover markdown at (0-based `line`, byte `col`) via the real client request.
---@param buf integer
---@param line integer
---@param col integer
---@return string?, table
function M.hover_text(buf, line, col)
  local win = vim.fn.bufwinid(buf)
  vim.api.nvim_win_set_cursor(win, { line + 1, col })
  local client = vim.lsp.get_clients({ bufnr = buf, name = 'exportlens' })[1]
  local params = vim.lsp.util.make_position_params(win, client.offset_encoding)
  local responses = vim.lsp.buf_request_sync(buf, 'textDocument/hover', params, M.REQUEST_MS) or {}
  local response = responses[client.id] or {}
  local result = response.result
  local contents = type(result) == 'table' and result.contents or nil
  local value = type(contents) == 'table' and contents.value or (type(contents) == 'string' and contents or nil)
  return value, response
end

--- The inlay hints Neovim holds for `buf` (what it draws), as `{ line, label }`.
---@param buf integer
---@return { line: integer, character: integer, label: string, tooltip: string? }[]
function M.hints(buf)
  local out = {}
  for _, item in ipairs(vim.lsp.inlay_hint.get({ bufnr = buf })) do
    local hint = item.inlay_hint
    local label = hint.label
    if type(label) == 'table' then
      label = table.concat(vim.tbl_map(function(part)
        return part.value
      end, label))
    end
    local tooltip = hint.tooltip
    if type(tooltip) == 'table' then
      tooltip = tooltip.value
    end
    out[#out + 1] = { line = hint.position.line, character = hint.position.character, label = label, tooltip = tooltip }
  end
  return out
end

--- The inlay hints drawn in `buf` (virtual text of Neovim's inlay hint namespace),
--- as `{ line, text }`: what is on the screen, not only what was received.
---@param buf integer
---@return { line: integer, text: string }[]
function M.drawn_hints(buf)
  -- Neovim draws inlay hints while redrawing a window that shows the buffer (a
  -- decoration provider), as a UI does all the time; headless, redraw first.
  vim.cmd.redraw()
  local ns = vim.api.nvim_get_namespaces()['nvim.lsp.inlayhint']
  local out = {}
  if ns == nil then
    return out
  end
  for _, mark in ipairs(vim.api.nvim_buf_get_extmarks(buf, ns, 0, -1, { details = true })) do
    local chunks = mark[4].virt_text or {}
    out[#out + 1] = { line = mark[2], text = table.concat(vim.tbl_map(function(c)
      return c[1]
    end, chunks)) }
  end
  return out
end

--- The code lenses Neovim holds for `buf`, as `{ line, title, command, arguments }`.
---@param buf integer
---@return table[]
function M.lenses(buf)
  local out = {}
  for _, lens in ipairs(vim.lsp.codelens.get(buf)) do
    if lens.command then
      out[#out + 1] = {
        line = lens.range.start.line,
        title = lens.command.title,
        command = lens.command.command,
        arguments = lens.command.arguments,
      }
    end
  end
  table.sort(out, function(a, b)
    return a.line < b.line or (a.line == b.line and a.title < b.title)
  end)
  return out
end

--- The code lens text drawn on each line of `buf` (virtual text of the client's
--- codelens namespace): `{ [line] = text }`.
---@param buf integer
---@param client vim.lsp.Client
---@return table<integer, string>
function M.drawn_lenses(buf, client)
  local ns = vim.api.nvim_get_namespaces()['nvim.lsp.codelens:' .. client.id]
  local out = {}
  if ns == nil then
    return out
  end
  for _, mark in ipairs(vim.api.nvim_buf_get_extmarks(buf, ns, 0, -1, { details = true })) do
    out[mark[2]] = table.concat(vim.tbl_map(function(c)
      return c[1]
    end, mark[4].virt_text or {}))
  end
  return out
end

--- The buffer named `name`, or nil.
---@param name string
---@return integer?
function M.buffer_named(name)
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_get_name(b) == name then
      return b
    end
  end
  return nil
end

--- The first notification after index `from` whose message matches `pattern`.
---@param T table
---@param from integer
---@param pattern string
---@return table?
function M.notification(T, from, pattern)
  for i = from + 1, #T.events.notifications do
    local n = T.events.notifications[i]
    if n.message:find(pattern) then
      return n
    end
  end
  return nil
end

--- How many diagnostics publishes the server has sent for `buf`.
---@param T table
---@param buf integer
---@return integer
function M.publishes_for(T, buf)
  local uri = vim.uri_from_bufnr(buf)
  return #vim.tbl_filter(function(p)
    return p.uri == uri
  end, T.events.publishes)
end

--- The number of result entries in the cache folder.
---@param T table
---@return integer
function M.cache_entries(T)
  local found = vim.fs.find(function(name)
    return name:match('%.entry$') ~= nil
  end, { path = T.env('EXPORTLENS_CACHE_DIR'), type = 'file', limit = math.huge })
  return #found
end

return M
