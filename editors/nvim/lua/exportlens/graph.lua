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

local function find_buffer(name)
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_valid(b) and vim.api.nvim_buf_get_name(b) == name then
      return b
    end
  end
  return nil
end

--- Show `text` in the graph buffer for `source`/`target`, in a split below; the
--- buffer number.
---@param source string
---@param target string?
---@param text string
---@return integer
function M.open(source, target, text)
  local name = M.buffer_name(source, target)
  local buf = find_buffer(name)
  if buf == nil then
    buf = vim.api.nvim_create_buf(false, true)
    vim.api.nvim_buf_set_name(buf, name)
    local bo = vim.bo[buf]
    bo.buftype = 'nofile'
    bo.bufhidden = 'wipe'
    bo.swapfile = false
    -- torch prints the graph as Python-like code: highlight it as such.
    bo.filetype = 'python'
  end
  local bo = vim.bo[buf]
  bo.readonly = false
  bo.modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, vim.split(text, '\n', { plain = true, trimempty = false }))
  bo.modifiable = false
  bo.readonly = true
  bo.modified = false
  local win = vim.fn.bufwinid(buf)
  if win == -1 then
    vim.api.nvim_open_win(buf, true, { split = 'below', win = -1 })
  else
    vim.api.nvim_set_current_win(win)
  end
  return buf
end

return M
