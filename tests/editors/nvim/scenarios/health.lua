--- :checkhealth exportlens for the project's interpreter (everything OK, the
--- running client listed once a file is open), then for an interpreter that
--- cannot import exportlens and for one that does not exist (errors that say so).

local lsp = require('exportlens_test.lsp')

--- Run :checkhealth exportlens; the report's lines (its buffer is wiped after).
local function checkhealth()
  vim.cmd('checkhealth exportlens')
  local lines
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(b) and vim.bo[b].filetype == 'checkhealth' then
      lines = vim.api.nvim_buf_get_lines(b, 0, -1, false)
      vim.api.nvim_buf_delete(b, { force = true })
    end
  end
  return lines or {}
end

--- The report line containing all of `needles` (plain text), or nil.
local function line_with(lines, ...)
  local needles = { ... }
  for _, line in ipairs(lines) do
    local all = true
    for _, needle in ipairs(needles) do
      if not line:find(needle, 1, true) then
        all = false
        break
      end
    end
    if all then
      return line
    end
  end
  return nil
end

local function with_cmd(python)
  vim.lsp.config('exportlens', { cmd = { python, '-P', '-m', 'exportlens', 'serve' } })
end

return function(T)
  local python = T.env('EXPORTLENS_NVIM_PYTHON')

  local before = checkhealth()
  T.need(':checkhealth exportlens produces a report', #before > 0)
  T.check('no errors or warnings for the project interpreter', line_with(before, 'ERROR') == nil and line_with(before, 'WARNING') == nil, before)
  T.check('OK: the Neovim version', line_with(before, 'OK', 'Neovim 0.1') ~= nil, before)
  T.check('OK: the config is enabled', line_with(before, 'OK', "vim.lsp.enable('exportlens')") ~= nil, before)
  T.check('OK: the interpreter exists', line_with(before, 'OK', python, 'found') ~= nil, before)
  T.check('OK: import exportlens works in it', line_with(before, 'OK', '`import exportlens` works') ~= nil, before)
  T.check('OK: torch is installed there', line_with(before, 'OK', 'torch is installed') ~= nil, before)
  T.check('no client is running before a file is open', line_with(before, 'no exportlens client is running') ~= nil, before)

  local buf = lsp.open(T, 'counter.py')
  local client = lsp.client(T, buf)
  local running = checkhealth()
  T.check('the running client is listed', line_with(running, 'OK', ('client %d running'):format(client.id), T.env('EXPORTLENS_NVIM_PROJECT')) ~= nil, running)

  with_cmd(T.env('EXPORTLENS_NVIM_BARE_PYTHON'))
  local bare = checkhealth()
  T.check('ERROR: an interpreter without exportlens', line_with(bare, 'ERROR', '`import exportlens` fails', 'ModuleNotFoundError') ~= nil, bare)

  local missing_python = vim.fs.joinpath(T.env('EXPORTLENS_NVIM_PROJECT'), 'no-such-python')
  with_cmd(missing_python)
  local missing = checkhealth()
  T.check('ERROR: an interpreter that does not exist', line_with(missing, 'ERROR', missing_python, 'is not an executable') ~= nil, missing)
end
