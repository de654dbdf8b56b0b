-- The init file of the Neovim editor tests (`nvim --headless --clean -u init.lua`).
-- It does what a user's config does: put the plugin on the runtimepath, point the
-- exportlens config at the project's interpreter and enable it. Then it adds spies
-- (they record, then call the real handlers) and the harness's own folder.

local plugin = assert(vim.env.EXPORTLENS_NVIM_PLUGIN, 'EXPORTLENS_NVIM_PLUGIN is not set')
local here = vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2))

vim.opt.runtimepath:prepend(plugin)
vim.opt.runtimepath:append(here)
vim.opt.swapfile = false
vim.opt.shadafile = 'NONE'

vim.lsp.config('exportlens', {
  cmd = { assert(vim.env.EXPORTLENS_NVIM_PYTHON, 'EXPORTLENS_NVIM_PYTHON is not set'), '-P', '-m', 'exportlens', 'serve' },
  -- A short debounce keeps the edit scenarios quick; the cache folder comes from
  -- $EXPORTLENS_CACHE_DIR, which the server inherits.
  init_options = { exportlens = { debounceMs = 100 } },
  settings = { exportlens = { workers = 1 } },
})
-- A server already listening (`exportlens serve --tcp` or `--socket`), connected to as
-- docs/editors.md shows: `HOST:PORT` or a socket path, and the token for --tcp.
local connect = vim.env.EXPORTLENS_NVIM_CONNECT
if connect and connect ~= '' then
  local host, port = connect:match('^(.*):(%d+)$')
  vim.lsp.config('exportlens', {
    cmd = host and vim.lsp.rpc.connect(host, tonumber(port)) or vim.lsp.rpc.connect(connect),
    init_options = { exportlens = { token = vim.env.EXPORTLENS_NVIM_TOKEN } },
  })
end
-- A scenario's own settings on top (JSON), as a user's vim.lsp.config would add them.
if vim.env.EXPORTLENS_NVIM_SETTINGS and vim.env.EXPORTLENS_NVIM_SETTINGS ~= '' then
  vim.lsp.config('exportlens', { settings = { exportlens = vim.json.decode(vim.env.EXPORTLENS_NVIM_SETTINGS) } })
end
vim.lsp.enable('exportlens')

local harness = require('exportlens_test.harness')

-- Every publishDiagnostics the client handles, with its version.
local publish = vim.lsp.handlers['textDocument/publishDiagnostics']
vim.lsp.handlers['textDocument/publishDiagnostics'] = function(err, params, ctx, config)
  if params then
    table.insert(harness.events.publishes, {
      uri = params.uri,
      version = params.version or vim.NIL,
      count = #(params.diagnostics or {}),
    })
  end
  return publish(err, params, ctx, config)
end

-- Every message the plugin (or Neovim) shows.
local notify = vim.notify
vim.notify = function(message, level, opts)
  table.insert(harness.events.notifications, { message = tostring(message), level = level or vim.log.levels.INFO })
  return notify(message, level, opts)
end

-- Every $/progress value the client receives (work-done progress while exporting).
vim.api.nvim_create_autocmd('LspProgress', {
  callback = function(ev)
    local value = ev.data and ev.data.params and ev.data.params.value or {}
    table.insert(harness.events.progress, { kind = value.kind, title = value.title or vim.NIL, message = value.message or vim.NIL })
  end,
})

-- Every workspace/codeLens/refresh the server sends (the plugin's handler, then the real one).
local features = require('exportlens.features')
local on_refresh = features.on_codelens_refresh
features.on_codelens_refresh = function(err, result, ctx)
  table.insert(harness.events.lens_refreshes, { client_id = ctx.client_id })
  return on_refresh(err, result, ctx)
end

-- The screen test's worst case of a loaded machine, made certain: the whole screen is
-- redrawn before each answer to a hint request is handled, as a diagnostic or a lens
-- drawn between the server's `workspace/inlayHint/refresh` and the answer does. With
-- Neovim's own refresh handler the answer's hints were then never drawn (neovim#26511);
-- the plugin's handler (lua/exportlens/features.lua) is what makes them show.
if vim.env.EXPORTLENS_NVIM_REDRAW_BEFORE_HINTS == '1' then
  local on_hints = vim.lsp.handlers['textDocument/inlayHint']
  vim.lsp.handlers['textDocument/inlayHint'] = function(...)
    vim.cmd('redraw!')
    return on_hints(...)
  end
end
