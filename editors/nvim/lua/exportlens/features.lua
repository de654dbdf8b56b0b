--- What the plugin turns on when the exportlens client attaches to a buffer: inlay
--- hints (the dtype and shape each line produced), code lenses (status, export time,
--- "Show graph" on each target's line) and their refreshes; and the client-side
--- handlers for the lens commands, whose results a user must see (Neovim's default
--- `workspace/executeCommand` handler drops them).
---
--- Neovim asks for inlay hints itself once enabled; the server's
--- `workspace/inlayHint/refresh` is handled here (Neovim's own handler can leave the new
--- hints undrawn); code lenses it only fetches when asked, so the
--- plugin asks on attach and whenever the server sends `workspace/codeLens/refresh`
--- (which lsp/exportlens.lua advertises support for and routes here).

local M = {}

--- The `exportlens` value of a settings table, with either spelling of the key.
---@param section table?
---@param snake string
---@param camel string
---@return any
local function setting(section, snake, camel)
  if type(section) ~= 'table' or type(section.exportlens) ~= 'table' then
    return nil
  end
  local value = section.exportlens[camel]
  if value == nil then
    value = section.exportlens[snake]
  end
  return value
end

--- Whether the user wants inlay hints from this client: `inlayHints` (or
--- `inlay_hints`) in `settings` wins over `init_options`, as on the server; default on.
---@param client vim.lsp.Client
---@return boolean
function M.hints_wanted(client)
  local value = setting(client.settings, 'inlay_hints', 'inlayHints')
  if value == nil then
    value = setting(client.config and client.config.init_options, 'inlay_hints', 'inlayHints')
  end
  return value ~= false
end

--- Whether this Neovim manages code lenses itself once enabled (the 0.12 release:
--- `vim.lsp.codelens.enable()`, which deprecates `refresh()`); 0.11 and the 0.12
--- development builds only fetch them when asked.
---@return boolean
local function lenses_self_managed()
  return type(vim.lsp.codelens.enable) == 'function'
end

--- Fetch (or turn on) the code lenses of `bufnr`.
---@param bufnr integer
function M.fetch_lenses(bufnr)
  if lenses_self_managed() then
    vim.lsp.codelens.enable(true, { bufnr = bufnr })
  else
    vim.lsp.codelens.refresh({ bufnr = bufnr })
  end
end

--- Ask for the code lenses of every buffer `client` is attached to.
---@param client vim.lsp.Client
function M.refresh_lenses(client)
  for bufnr in pairs(client.attached_buffers or {}) do
    if vim.api.nvim_buf_is_loaded(bufnr) then
      M.fetch_lenses(bufnr)
    end
  end
end

--- Handler of the server's `workspace/codeLens/refresh` request.
---@param ctx lsp.HandlerContext
---@return vim.NIL
function M.on_codelens_refresh(err, result, ctx)
  local builtin = vim.lsp.handlers['workspace/codeLens/refresh']
  if lenses_self_managed() and builtin then
    return builtin(err, result, ctx) -- a Neovim that handles the request itself
  end
  local client = vim.lsp.get_client_by_id(ctx.client_id)
  if client then
    -- Not from inside the request handler: the lens requests go out after the reply.
    vim.schedule(function()
      M.refresh_lenses(client)
    end)
  end
  return vim.NIL
end

--- Handler of the server's `workspace/inlayHint/refresh` request: every loaded buffer
--- of the client whose hints are on asks for them again, from a clean slate.
---
--- Neovim's own handler keeps, per line, the version whose hints it last drew, and its
--- answer handler does not clear that: when the screen is redrawn between the refresh
--- and the answer (a diagnostic or a lens drawn meanwhile, as on a loaded machine), the
--- line is marked drawn with the old hints and the answer's are never shown
--- (neovim#26511: an export finishing after the file was opened left its hints unseen).
--- Enabling a buffer's hints again resets that state, so nothing is marked drawn until
--- the answer is in; the hints already on screen stay until it replaces them.
---@param ctx lsp.HandlerContext
---@return vim.NIL
function M.on_inlay_hint_refresh(err, _, ctx)
  if err or not vim.lsp.inlay_hint then
    return vim.NIL
  end
  local client = vim.lsp.get_client_by_id(ctx.client_id)
  if client then
    for bufnr in pairs(client.attached_buffers or {}) do
      if vim.api.nvim_buf_is_loaded(bufnr) and vim.lsp.inlay_hint.is_enabled({ bufnr = bufnr }) then
        vim.lsp.inlay_hint.enable(true, { bufnr = bufnr })
      end
    end
  end
  return vim.NIL
end

--- LspAttach for the exportlens client: hints on (unless turned off), lenses fetched.
---@param client vim.lsp.Client
---@param bufnr integer
function M.on_attach(client, bufnr)
  if vim.lsp.inlay_hint and client:supports_method('textDocument/inlayHint', bufnr) and M.hints_wanted(client) then
    vim.lsp.inlay_hint.enable(true, { bufnr = bufnr })
  end
  if client:supports_method('textDocument/codeLens', bufnr) then
    M.fetch_lenses(bufnr)
  end
end

--- Client-side `exportlens.reexport` (a lens's "✓ exported in …"): run it on the
--- server and say what came of it, as `:ExportlensReexport` does.
---@param command lsp.Command
---@param ctx { bufnr: integer, client_id: integer }
function M.lens_reexport(command, ctx)
  local exportlens = require('exportlens')
  local client = vim.lsp.get_client_by_id(ctx.client_id)
  if client == nil then
    return
  end
  exportlens.request(client, 'exportlens.reexport', command.arguments or {}, ctx.bufnr, function(status)
    exportlens.notify('exported again: ' .. exportlens.describe_status(type(status) == 'table' and status or {}))
  end)
  -- Running a lens blanks its line until the next fetch: fetch now.
  M.fetch_lenses(ctx.bufnr)
end

--- Client-side `exportlens.graph` (a lens's "Show graph"): the graph view with
--- go-to-source, jumping back into the window the lens was clicked in.
---@param command lsp.Command
---@param ctx { bufnr: integer, client_id: integer }
function M.lens_graph(command, ctx)
  local client = vim.lsp.get_client_by_id(ctx.client_id)
  if client == nil then
    return
  end
  local arguments = command.arguments or {}
  local first = arguments[1]
  local target = type(first) == 'table' and first.target or arguments[2]
  require('exportlens').graph_view(client, ctx.bufnr, arguments, type(target) == 'string' and target or nil)
  M.fetch_lenses(ctx.bufnr)
end

--- The lens commands Neovim runs in the client (`vim.lsp.commands`).
M.commands = {
  ['exportlens.reexport'] = M.lens_reexport,
  ['exportlens.graph'] = M.lens_graph,
}

return M
