--- The user commands' logic: run the server's `workspace/executeCommand` commands
--- on the exportlens client attached to a buffer and show what they return.
--- Everything is asynchronous (a request with a handler): a re-export can take as
--- long as the export itself and must not block the editor. Requests go straight to
--- the server, not through `Client:exec_cmd`, which would find the plugin's own
--- client-side handlers of the lens commands (lua/exportlens/features.lua).

local M = {}

M.name = 'exportlens'

local levels = vim.log.levels

local function notify(message, level)
  vim.notify('exportlens: ' .. message, level or levels.INFO)
end
M.notify = notify

--- The exportlens client attached to `bufnr` (0: current), or nil.
---@param bufnr integer?
---@return vim.lsp.Client?
function M.client(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  return vim.lsp.get_clients({ bufnr = bufnr, name = M.name })[1]
end

--- Run server command `command` with `arguments` for `bufnr`; `on_result(result)`
--- runs on success. Returns false (after saying why) when it cannot be sent.
---@param command string
---@param arguments any[]
---@param bufnr integer?
---@param on_result fun(result: any, client: vim.lsp.Client)
---@return boolean
function M.exec(command, arguments, bufnr, on_result)
  if vim.fn.has('nvim-0.11') == 0 then
    notify('these commands need Neovim 0.11 or newer', levels.ERROR)
    return false
  end
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  local client = M.client(bufnr)
  if client == nil then
    local name = vim.api.nvim_buf_get_name(bufnr)
    notify(
      ('no exportlens language server is attached to %s; open a Python file of your project, '
        .. 'and see :checkhealth exportlens if it does not start'):format(name ~= '' and vim.fn.fnamemodify(name, ':~:.') or 'this buffer'),
      levels.WARN
    )
    return false
  end
  M.request(client, command, arguments, bufnr, on_result)
  return true
end

--- Send `workspace/executeCommand` for `command` to `client`; `on_result(result)` on
--- success, an error message otherwise.
---@param client vim.lsp.Client
---@param command string
---@param arguments any[]
---@param bufnr integer
---@param on_result fun(result: any, client: vim.lsp.Client)
function M.request(client, command, arguments, bufnr, on_result)
  client:request('workspace/executeCommand', { command = command, arguments = arguments }, function(err, result)
    if err then
      notify(('%s failed: %s'):format(command, err.message or vim.inspect(err)), levels.ERROR)
      return
    end
    on_result(result, client)
  end, bufnr)
end

--- One line for an `exportlens.status` result: "ok, 0 errors (Counter ok)".
---@param status table
---@return string
function M.describe_status(status)
  local targets = {}
  for _, t in ipairs(type(status.targets) == 'table' and status.targets or {}) do
    targets[#targets + 1] = ('%s %s'):format(t.name, t.status)
  end
  local errors = tonumber(status.errors) or 0
  local text = ('%s, %d error%s'):format(tostring(status.state), errors, errors == 1 and '' or 's')
  if #targets > 0 then
    text = text .. ' (' .. table.concat(targets, ', ') .. ')'
  end
  return text
end

--- `:ExportlensReexport`: export the buffer again now, bypassing the cache.
---@param bufnr integer?
function M.reexport(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  M.exec('exportlens.reexport', { vim.uri_from_bufnr(bufnr) }, bufnr, function(status)
    notify('exported again: ' .. M.describe_status(type(status) == 'table' and status or {}))
  end)
end

--- `:ExportlensClearCache`: empty the server's result cache.
---@param bufnr integer?
function M.clear_cache(bufnr)
  M.exec('exportlens.clearCache', {}, bufnr, function(removed)
    local n = tonumber(removed) or 0
    notify(('removed %d cached result%s'):format(n, n == 1 and '' or 's'))
  end)
end

--- `:ExportlensTrust [folder]`: let the server run the code of `folder` (default: the
--- workspace folders) and export its open files at once (the server's `exportlens.trust`,
--- which the quick fix on its `untrusted-folder` notice also runs).
---@param bufnr integer?
---@param folder string?
function M.trust(bufnr, folder)
  local arguments = {}
  if folder ~= nil and folder ~= '' then
    arguments[1] = vim.fn.fnamemodify(vim.fn.expand(folder), ':p')
  end
  M.exec('exportlens.trust', arguments, bufnr, function(result)
    local trusted = type(result) == 'table' and type(result.trusted) == 'table' and result.trusted or {}
    notify(('trusted %s; exporting its models'):format(table.concat(trusted, ', ')))
  end)
end

--- `:ExportlensShowGraph [target]`: the exported graph in a read-only scratch buffer.
---@param bufnr integer?
---@param target string?
function M.show_graph(bufnr, target)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  local arguments = { vim.uri_from_bufnr(bufnr) }
  if target ~= nil and target ~= '' then
    arguments[2] = target
  end
  local source = vim.api.nvim_buf_get_name(bufnr)
  M.exec('exportlens.showGraph', arguments, bufnr, function(text)
    if type(text) ~= 'string' then
      notify('the server returned no graph text', levels.ERROR)
      return
    end
    require('exportlens.graph').open(source, arguments[2], text)
  end)
end

--- Show an `exportlens.graph` result of `client` for `bufnr` in the graph view; the
--- view's rows jump back into the current window.
---@param client vim.lsp.Client
---@param bufnr integer
---@param arguments any[] the command's arguments
---@param what string? the target name, or `:LINE` (1-based) for a line's nodes
---@param on_open fun(buf: integer)?
---@param accept (fun(result: table): boolean)? false: the result is not shown (it says why)
function M.graph_view(client, bufnr, arguments, what, on_open, accept)
  local source_win = vim.api.nvim_get_current_win()
  local source = vim.api.nvim_buf_get_name(bufnr)
  M.request(client, 'exportlens.graph', arguments, bufnr, function(result)
    if type(result) ~= 'table' or type(result.text) ~= 'string' then
      notify('the server returned no graph', levels.ERROR)
      return
    end
    if accept and not accept(result) then
      return
    end
    local view = require('exportlens.view')
    local buf = view.open(view.buffer_name(source, what), result, source_win, client.offset_encoding or 'utf-16')
    if on_open then
      on_open(buf)
    end
  end)
end

--- `:ExportlensGraph [target]`: every node of the file's targets (or of one), each
--- row jumping to its source line.
---@param bufnr integer?
---@param target string?
function M.graph(bufnr, target)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  local client = M.client(bufnr)
  local argument = { uri = vim.uri_from_bufnr(bufnr) }
  if target ~= nil and target ~= '' then
    argument.target = target
  end
  -- M.exec says why when there is no client; the view needs the client itself.
  if client == nil then
    return M.exec('exportlens.graph', { argument }, bufnr, function() end)
  end
  M.graph_view(client, bufnr, { argument }, argument.target)
end

local cursor_timer = nil

--- Once a picture was opened: the cursor's line (once it rests 150 ms, on a new line)
--- goes to the server as `exportlens/cursor`, which has the open pictures select the
--- nodes that line made.
function M.follow_cursor()
  if cursor_timer ~= nil then
    return
  end
  cursor_timer = vim.uv.new_timer()
  local last = {}
  vim.api.nvim_create_autocmd({ 'CursorMoved', 'CursorMovedI' }, {
    group = vim.api.nvim_create_augroup('exportlens_graph_cursor', { clear = true }),
    callback = function(ev)
      if vim.bo[ev.buf].buftype ~= '' or M.client(ev.buf) == nil then
        return
      end
      local uri, line = vim.uri_from_bufnr(ev.buf), vim.api.nvim_win_get_cursor(0)[1] - 1
      if last.uri == uri and last.line == line then
        return
      end
      last = { uri = uri, line = line }
      cursor_timer:stop()
      cursor_timer:start(150, 0, vim.schedule_wrap(function()
        local client = M.client(ev.buf)
        if client ~= nil then
          client:notify('exportlens/cursor', { uri = uri, line = line })
        end
      end))
    end,
  })
end

--- `:ExportlensGraphPage [target]`: the graph as a picture (Model Explorer's page,
--- served by the language server on 127.0.0.1), opened with `vim.ui.open` (the
--- system's browser). Selecting a node there makes the server send
--- `window/showDocument`, which Neovim answers by opening the node's line.
---@param bufnr integer?
---@param target string?
---@param open fun(url: string)? how the address is opened (default `vim.ui.open`)
function M.graph_page(bufnr, target, open)
  local argument = { uri = vim.uri_from_bufnr((bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr), page = true }
  if target ~= nil and target ~= '' then
    argument.target = target
  end
  return M.exec('exportlens.graph', { argument }, bufnr, function(result)
    if type(result) ~= 'table' or type(result.url) ~= 'string' then
      notify('the server returned no page', levels.ERROR)
      return
    end
    vim.g.exportlens_graph_url = result.url
    M.follow_cursor()
    notify(('%s: %s'):format(result.title or 'graph', result.url))
    if open then
      open(result.url)
    elseif vim.ui.open then
      vim.ui.open(result.url)
    end
  end)
end

--- `:ExportlensNodes`: the nodes the cursor's line produced ("what did this line
--- become"), in the graph view; says so when the line produced none.
---@param bufnr integer?
---@param line integer? 0-based; the cursor's line by default
function M.nodes(bufnr, line)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  line = line or (vim.api.nvim_win_get_cursor(0)[1] - 1)
  local client = M.client(bufnr)
  local arguments = { { uri = vim.uri_from_bufnr(bufnr), line = line } }
  if client == nil then
    return M.exec('exportlens.graph', arguments, bufnr, function() end)
  end
  M.graph_view(client, bufnr, arguments, ':' .. (line + 1), nil, function(result)
    if type(result.links) ~= 'table' or #result.links == 0 then
      notify(('line %d produced no nodes in the exported graph'):format(line + 1))
      return false
    end
    return true
  end)
end

--- Completion for `:ExportlensShowGraph`: the current buffer's target names.
---@param arglead string
---@return string[]
function M.complete_targets(arglead)
  local client = M.client(0)
  if client == nil then
    return {}
  end
  local params = { command = 'exportlens.status', arguments = { vim.uri_from_bufnr(0) } }
  local response = client:request_sync('workspace/executeCommand', params, 1000, 0)
  local names = {}
  if response and response.result and type(response.result.targets) == 'table' then
    for _, t in ipairs(response.result.targets) do
      if type(t.name) == 'string' and vim.startswith(t.name, arglead) then
        names[#names + 1] = t.name
      end
    end
  end
  return names
end

return M
