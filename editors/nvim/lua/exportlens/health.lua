--- `:checkhealth exportlens`: can the language server start here?
--- Neovim version, the configured interpreter, whether exportlens (and its server
--- dependencies) import in it, whether torch is installed there, running clients.

local M = {}

local health = vim.health

-- Printed by the interpreter as one JSON line. It imports the server module (which
-- must not import torch) and only looks torch up, so the check stays quick.
local PROBE = [[
import importlib.util, json, sys
out = {"python": sys.version.split()[0], "executable": sys.executable}
try:
    import exportlens, exportlens.server.app
    out["exportlens"] = getattr(exportlens, "__version__", "?")
except Exception as e:
    out["error"] = f"{type(e).__name__}: {e}"
out["torch"] = importlib.util.find_spec("torch") is not None
print(json.dumps(out))
]]

local PROBE_TIMEOUT_MS = 30000

--- The interpreter of a `{ python, ['-P',] '-m', 'exportlens', ... }` command, else nil.
---@param cmd string[]
---@return string?
local function interpreter_of(cmd)
  local at = cmd[2] == '-P' and 3 or 2
  if cmd[at] == '-m' and cmd[at + 1] == 'exportlens' then
    return cmd[1]
  end
  return nil
end

local function check_version()
  local v = vim.version()
  local text = ('Neovim %d.%d.%d'):format(v.major, v.minor, v.patch)
  if vim.fn.has('nvim-0.11') == 1 then
    health.ok(text .. ' (0.11 or newer: vim.lsp.config / vim.lsp.enable)')
  else
    health.error(text .. ': exportlens needs Neovim 0.11 or newer', { 'Upgrade Neovim.' })
  end
end

---@return string[]?
local function check_config()
  local ok, config = pcall(function()
    return vim.lsp.config.exportlens
  end)
  if not ok or config == nil then
    health.error('no `exportlens` LSP config found', {
      'Add editors/nvim of the exportlens repository to the runtimepath (it holds lsp/exportlens.lua).',
    })
    return nil
  end
  if vim.lsp.is_enabled == nil then
    -- Not in every 0.11 release: nothing to ask, so do not guess.
    health.info("cannot tell whether vim.lsp.enable('exportlens') was called (no vim.lsp.is_enabled)")
  elseif vim.lsp.is_enabled('exportlens') then
    health.ok("vim.lsp.enable('exportlens') was called")
  else
    health.warn('the exportlens config is not enabled', { "Call vim.lsp.enable('exportlens') in your config." })
  end
  if type(config.cmd) ~= 'table' or type(config.cmd[1]) ~= 'string' then
    health.info('cmd is a function (an RPC client); the interpreter cannot be checked from here')
    return nil
  end
  health.info('cmd: ' .. table.concat(config.cmd, ' '))
  return config.cmd
end

---@param cmd string[]
local function check_interpreter(cmd)
  local program = cmd[1]
  local path = vim.fn.exepath(program)
  if path == '' then
    health.error(('`%s` is not an executable'):format(program), {
      "Set the interpreter of the environment that has exportlens and torch:\n"
        .. "vim.lsp.config('exportlens', { cmd = { '/path/to/venv/bin/python', '-P', '-m', 'exportlens', 'serve' } })",
    })
    return
  end
  health.ok(('`%s` found: %s'):format(program, path))
  local python = interpreter_of(cmd)
  if python == nil then
    health.info('cmd does not run `python -m exportlens`; skipping the import check')
    return
  end
  -- -P as for the server: a `tokenize.py` in the current folder must not stand in for the library.
  local ok, proc = pcall(vim.system, { path, '-P', '-c', PROBE }, { text = true })
  if not ok then
    health.error(('cannot run `%s`: %s'):format(path, tostring(proc)))
    return
  end
  local done = proc:wait(PROBE_TIMEOUT_MS)
  -- The last line: a sitecustomize that prints must not hide the answer.
  local lines = vim.split(vim.trim(done.stdout or ''), '\n', { plain = true })
  local line = lines[#lines] or ''
  local decoded_ok, info = pcall(vim.json.decode, line)
  if done.code ~= 0 or not decoded_ok or type(info) ~= 'table' then
    health.error(('`%s -c "import exportlens"` failed (exit %s)'):format(path, tostring(done.code)), {
      vim.trim((done.stderr or '') .. '\n' .. line),
    })
    return
  end
  if info.error then
    health.error(('`import exportlens` fails in %s (Python %s): %s'):format(info.executable, info.python, info.error), {
      ('Install it there: %s -m pip install exportlens (or pip install -e path/to/exportlens).'):format(path),
    })
    return
  end
  health.ok(('`import exportlens` works: exportlens %s, Python %s (%s)'):format(info.exportlens, info.python, info.executable))
  if info.torch then
    health.ok('torch is installed in that environment')
  else
    health.warn('torch is not installed in that environment: the server starts but every export fails', {
      'Install torch into the same environment as exportlens.',
    })
  end
end

local function check_clients()
  local clients = vim.lsp.get_clients({ name = 'exportlens' })
  if #clients == 0 then
    health.info('no exportlens client is running (open a Python file of a project to start one)')
    return
  end
  for _, client in ipairs(clients) do
    local buffers = vim.tbl_count(client.attached_buffers or {})
    health.ok(('client %d running (root %s, %d buffer%s attached)'):format(
      client.id,
      client.root_dir or client.config.root_dir or '?',
      buffers,
      buffers == 1 and '' or 's'
    ))
  end
end

function M.check()
  health.start('Neovim')
  check_version()
  health.start('Language server command')
  local cmd = check_config()
  if cmd then
    check_interpreter(cmd)
  end
  health.start('Clients')
  check_clients()
end

return M
