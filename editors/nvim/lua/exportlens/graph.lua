--- The read-only scratch buffer `:ExportlensShowGraph` shows the graph text in.
--- One buffer per source file (and target), reused and refreshed on the next call.

local M = {}

--- The graph buffer's name for `source` (and `target`).
---@param source string
---@param target string?
---@return string
function M.buffer_name(source, target)
  local name = 'exportlens://graph/' .. vim.fn.fnamemodify(source, ':t')
  if target ~= nil and target ~= '' then
    name = name .. '#' .. target
  end
  return name
end

--- The buffer named `name` (a graph buffer or the graph view), or nil.
---@param name string
---@return integer?
function M.find_buffer(name)
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_valid(b) and vim.api.nvim_buf_get_name(b) == name then
      return b
    end
  end
  return nil
end

--- A new scratch buffer named `name` (a graph buffer or the graph view) of
--- `filetype`: no file, no swap file, wiped once hidden.
---@param name string
---@param filetype string
---@return integer
function M.new_buffer(name, filetype)
  local buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_name(buf, name)
  local bo = vim.bo[buf]
  bo.buftype = 'nofile'
  bo.bufhidden = 'wipe'
  bo.swapfile = false
  bo.filetype = filetype
  return buf
end

--- Replace the lines of the read-only buffer `buf` (a graph buffer or the graph
--- view), which stays read-only and unmodified.
---@param buf integer
---@param lines string[]
function M.set_lines(buf, lines)
  local bo = vim.bo[buf]
  bo.readonly = false
  bo.modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  bo.modifiable = false
  bo.readonly = true
  bo.modified = false
end

--- Show `text` in the graph buffer for `source`/`target`, in a split below; the
--- buffer number.
---@param source string
---@param target string?
---@param text string
---@return integer
function M.open(source, target, text)
  local name = M.buffer_name(source, target)
  local buf = M.find_buffer(name)
  if buf == nil then
    -- torch prints the graph as Python-like code: highlight it as such.
    buf = M.new_buffer(name, 'python')
  end
  M.set_lines(buf, vim.split(text, '\n', { plain = true, trimempty = false }))
  local win = vim.fn.bufwinid(buf)
  if win == -1 then
    vim.api.nvim_open_win(buf, true, { split = 'below', win = -1 })
  else
    vim.api.nvim_set_current_win(win)
  end
  return buf
end

return M
