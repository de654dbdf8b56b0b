--- The graph view: what `exportlens.graph` returns (`{ title, text, links }`), one
--- row per node, shown in a read-only scratch buffer where `<CR>` (or `gd`) on a
--- row jumps to the source line that node came from, in the window the view was
--- opened from. `:ExportlensGraph` (a whole target) and `:ExportlensNodes` (the
--- nodes one line produced) both land here; `:ExportlensShowGraph` keeps torch's own
--- printed graph (lua/exportlens/graph.lua), which has no way back to the code.

local graph = require('exportlens.graph')

local M = {}

M.FILETYPE = 'exportlens-graph'

local ns = vim.api.nvim_create_namespace('exportlens.graph.links')

-- Per view buffer: its links by 0-based row, the window to jump in, the encoding
-- the server's columns and ranges are in.
---@class exportlens.ViewState
---@field links table<integer, table[]>
---@field source_win integer
---@field encoding string

---@type table<integer, exportlens.ViewState>
local views = {}

--- Byte column of UTF-16 column `col` in `line` (links count in UTF-16, as LSP does).
---@param line string
---@param col integer
---@param encoding string
---@return integer
local function byte_col(line, col, encoding)
  if encoding == 'utf-8' then
    return math.min(col, #line)
  end
  local ok, at = pcall(vim.str_byteindex, line, encoding, col, false)
  return ok and at or #line
end

--- The link under the cursor of a view buffer's window: the one whose columns hold
--- the cursor, else the row's first (the whole row stands for its node).
---@param buf integer
---@param row integer 0-based
---@param col integer byte column
---@return table?
function M.link_at(buf, row, col)
  local state = views[buf]
  local row_links = state and state.links[row]
  if not row_links or #row_links == 0 then
    return nil
  end
  for _, link in ipairs(row_links) do
    if col >= link.byte_start and col < link.byte_end then
      return link
    end
  end
  return row_links[1]
end

--- A window to open the source in: the one the view came from if it still exists,
--- else any other normal window, else a new split above.
---@param view_win integer
---@param state exportlens.ViewState
---@return integer
local function target_window(view_win, state)
  if state.source_win and vim.api.nvim_win_is_valid(state.source_win) and state.source_win ~= view_win then
    return state.source_win
  end
  for _, w in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    if w ~= view_win and vim.api.nvim_win_get_config(w).relative == '' then
      return w
    end
  end
  return vim.api.nvim_open_win(0, false, { split = 'above', win = view_win })
end

--- Jump from the cursor's row of the current view buffer to its source line.
--- Returns whether it jumped (and says why not otherwise).
---@return boolean
function M.jump()
  local buf = vim.api.nvim_get_current_buf()
  local state = views[buf]
  local cursor = vim.api.nvim_win_get_cursor(0)
  local link = state and M.link_at(buf, cursor[1] - 1, cursor[2])
  if not link then
    vim.notify('exportlens: this row names no source line', vim.log.levels.INFO)
    return false
  end
  local view_win = vim.api.nvim_get_current_win()
  local win = target_window(view_win, state)
  vim.api.nvim_set_current_win(win)
  state.source_win = win
  return vim.lsp.util.show_document({ uri = link.uri, range = link.range }, state.encoding, { focus = true })
end

--- The view buffer's name: one per source file and target (or line), reused. The
--- file as relative to the current directory as it gets, so that two `model.py` of
--- a project have views of their own.
---@param source string the source buffer's file name
---@param what string? a target name, or `:LINE` for a line's nodes
---@return string
function M.buffer_name(source, what)
  local name = 'exportlens://nodes/' .. vim.fn.fnamemodify(source, ':~:.')
  if what ~= nil and what ~= '' then
    name = name .. (vim.startswith(what, ':') and what or ('#' .. what))
  end
  return name
end

--- Show an `exportlens.graph` result in its view buffer, in a split below the
--- current window (or the window already showing it); the buffer number.
---@param name string the buffer name (see `buffer_name`)
---@param result { title: string, text: string, links: table[] }
---@param source_win integer the window `<CR>` jumps in
---@param encoding string the client's position encoding
---@return integer
function M.open(name, result, source_win, encoding)
  local buf = graph.find_buffer(name)
  if buf == nil then
    buf = graph.new_buffer(name, M.FILETYPE)
    local function map(lhs, desc)
      vim.keymap.set('n', lhs, M.jump, { buffer = buf, nowait = true, desc = desc })
    end
    map('<CR>', 'exportlens: go to the source line of this node')
    map('gd', 'exportlens: go to the source line of this node')
    vim.keymap.set('n', 'q', '<Cmd>close<CR>', { buffer = buf, nowait = true, desc = 'exportlens: close the graph view' })
    vim.api.nvim_create_autocmd('BufWipeout', {
      buffer = buf,
      once = true,
      callback = function()
        views[buf] = nil
      end,
    })
  end
  local lines = vim.split(result.text or '', '\n', { plain = true, trimempty = false })
  if result.title and result.title ~= '' then
    vim.b[buf].exportlens_title = result.title
  end
  graph.set_lines(buf, lines)

  -- Links: keyed by row, with byte columns for the cursor test and the underline.
  local by_row = {}
  vim.api.nvim_buf_clear_namespace(buf, ns, 0, -1)
  for _, link in ipairs(type(result.links) == 'table' and result.links or {}) do
    local text = lines[(link.line or -1) + 1]
    if text ~= nil and type(link.uri) == 'string' and type(link.range) == 'table' then
      local entry = {
        uri = link.uri,
        range = link.range,
        byte_start = byte_col(text, link.start or 0, encoding),
        byte_end = byte_col(text, link['end'] or 0, encoding),
      }
      by_row[link.line] = by_row[link.line] or {}
      table.insert(by_row[link.line], entry)
      if entry.byte_end > entry.byte_start then
        vim.api.nvim_buf_set_extmark(buf, ns, link.line, entry.byte_start, { end_col = entry.byte_end, hl_group = 'Underlined' })
      end
    end
  end
  views[buf] = { links = by_row, source_win = source_win, encoding = encoding }

  local win = vim.fn.bufwinid(buf)
  if win == -1 then
    win = vim.api.nvim_open_win(buf, true, { split = 'below', win = source_win })
  else
    vim.api.nvim_set_current_win(win)
  end
  -- Start on the first row that leads somewhere (row 0 is usually a header).
  local rows = vim.tbl_keys(by_row)
  table.sort(rows)
  if rows[1] ~= nil then
    vim.api.nvim_win_set_cursor(win, { rows[1] + 1, 0 })
  end
  return buf
end

--- The links of a view buffer (for tests and other plugins): row -> links.
---@param buf integer
---@return table<integer, table[]>?
function M.links(buf)
  return views[buf] and views[buf].links
end

return M
