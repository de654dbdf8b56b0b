--- The test harness the scenarios run in (inside the real, headless Neovim).
---
--- A scenario is a Lua file returning `function(T)`. It records checks with
--- `T.check` (go on after a failure) or `T.need` (stop the scenario: later steps
--- depend on it) and waits with `T.wait`, always with a limit. `run` writes every
--- check, the error that stopped the scenario (if any) and the recorded events as
--- JSON to $EXPORTLENS_NVIM_RESULT, then quits Neovim; pytest reads that file.
--- A deadline timer writes the file and quits too, so a stuck scenario never hangs.

local M = {}

local uv = vim.uv or vim.loop
local STOP = {} -- raised by T.need to end a scenario early

local state = {
  checks = {},
  log = {},
  finished = false,
  started = uv.hrtime(),
}

--- Events recorded by the spies in init.lua (publishes, notifications).
M.events = { publishes = {}, notifications = {}, progress = {}, lens_refreshes = {} }

local function text(value)
  if type(value) == 'string' then
    return value
  end
  return vim.inspect(value)
end

---@param ... any
function M.log(...)
  local parts = {}
  for i = 1, select('#', ...) do
    parts[#parts + 1] = text((select(i, ...)))
  end
  local seconds = (uv.hrtime() - state.started) / 1e9
  state.log[#state.log + 1] = ('[%6.2fs] %s'):format(seconds, table.concat(parts, ' '))
end

--- Record a check; returns `ok`.
---@param name string
---@param ok any
---@param detail any?
---@return boolean
function M.check(name, ok, detail)
  local passed = ok and true or false
  state.checks[#state.checks + 1] = { name = name, ok = passed, detail = detail ~= nil and text(detail) or vim.NIL }
  -- Details only for failures: they are what the pytest message shows.
  M.log(passed and 'PASS' or 'FAIL', name, (not passed and detail ~= nil) and text(detail) or '')
  return passed
end

--- Record a check that later steps depend on: a failure ends the scenario.
---@param name string
---@param ok any
---@param detail any?
function M.need(name, ok, detail)
  if not M.check(name, ok, detail) then
    error(STOP, 0)
  end
end

--- Wait up to `ms` for `condition()` to return a truthy value; that value, or nil.
---@param ms integer
---@param condition fun(): any
---@return any
function M.wait(ms, condition)
  local value
  vim.wait(ms, function()
    local ok, result = pcall(condition)
    if ok and result then
      value = result
      return true
    end
    return false
  end, 50)
  return value
end

--- The environment variable `name`, which must be set.
---@param name string
---@return string
function M.env(name)
  local value = vim.env[name]
  if value == nil or value == '' then
    error(('the test runner did not set $%s'):format(name))
  end
  return value
end

--- What the CLI reported (written by pytest): `files[name]` the diagnostics per file,
--- `variants[name]` = { text, diagnostics } for an edited version of a file.
---@return table
function M.expected()
  local data = vim.fn.readfile(M.env('EXPORTLENS_NVIM_EXPECTED'))
  return vim.json.decode(table.concat(data, '\n'))
end

local function finish(error_text)
  if state.finished then
    return
  end
  state.finished = true
  local result = {
    checks = state.checks,
    error = error_text or vim.NIL,
    log = state.log,
    publishes = M.events.publishes,
    notifications = M.events.notifications,
    progress = M.events.progress,
  }
  vim.fn.writefile({ vim.json.encode(result) }, M.env('EXPORTLENS_NVIM_RESULT'))
  -- Quitting stops the LSP clients (shutdown + exit), as a user's :qa would.
  vim.cmd('qall!')
end

--- Run the scenario file `path`, write the results and quit.
---@param path string
function M.run(path)
  local deadline = tonumber(vim.env.EXPORTLENS_NVIM_DEADLINE_MS) or 240000
  local timer = uv.new_timer()
  timer:start(deadline, 0, vim.schedule_wrap(function()
    finish(('the scenario did not finish within %d ms'):format(deadline))
  end))
  local ok, err = xpcall(function()
    local scenario = dofile(path)
    scenario(M)
  end, function(e)
    if e == STOP then
      return STOP
    end
    return debug.traceback(text(e), 2)
  end)
  timer:stop()
  timer:close()
  if ok or err == STOP then
    finish(nil)
  else
    finish(err)
  end
end

return M
