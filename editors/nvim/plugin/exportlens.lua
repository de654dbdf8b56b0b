-- User commands for the exportlens language server (see :help exportlens).
-- The server itself is configured by lsp/exportlens.lua and started by
-- vim.lsp.enable('exportlens'); these commands talk to the client attached to the
-- current buffer. On attach the plugin turns on inlay hints and code lenses, and it
-- runs the lens commands in the client, where their results can be shown.

if vim.g.loaded_exportlens then
  return
end
vim.g.loaded_exportlens = true

local function exportlens()
  return require('exportlens')
end

vim.api.nvim_create_user_command('ExportlensReexport', function()
  exportlens().reexport(0)
end, { nargs = 0, desc = 'exportlens: export the current file again now (bypassing the cache)' })

vim.api.nvim_create_user_command('ExportlensShowGraph', function(opts)
  exportlens().show_graph(0, opts.args)
end, {
  nargs = '?',
  complete = function(arglead)
    return exportlens().complete_targets(arglead)
  end,
  desc = 'exportlens: show the exported graph of the current file (or of one target)',
})

vim.api.nvim_create_user_command('ExportlensGraph', function(opts)
  exportlens().graph(0, opts.args)
end, {
  nargs = '?',
  complete = function(arglead)
    return exportlens().complete_targets(arglead)
  end,
  desc = 'exportlens: the nodes of the current file (or of one target); <CR> on a row goes to its source line',
})

vim.api.nvim_create_user_command('ExportlensGraphPage', function(opts)
  exportlens().graph_page(0, opts.args)
end, {
  nargs = '?',
  complete = function(arglead)
    return exportlens().complete_targets(arglead)
  end,
  desc = 'exportlens: the graph as a picture in the browser (Model Explorer); selecting a node opens its line here',
})

vim.api.nvim_create_user_command('ExportlensNodes', function()
  exportlens().nodes(0)
end, { nargs = 0, desc = "exportlens: the nodes the cursor's line produced; <CR> on a row goes to its source line" })

-- The lens commands: Neovim's default executeCommand handler drops their results.
for name, handler in pairs(require('exportlens.features').commands) do
  vim.lsp.commands[name] = handler
end

vim.api.nvim_create_autocmd('LspAttach', {
  group = vim.api.nvim_create_augroup('exportlens', { clear = true }),
  desc = 'exportlens: inlay hints and code lenses',
  callback = function(ev)
    local client = vim.lsp.get_client_by_id(ev.data.client_id)
    if client and client.name == exportlens().name then
      require('exportlens.features').on_attach(client, ev.buf)
    end
  end,
})

vim.api.nvim_create_user_command('ExportlensClearCache', function()
  exportlens().clear_cache(0)
end, { nargs = 0, desc = 'exportlens: empty the result cache' })

vim.api.nvim_create_user_command('ExportlensTrust', function(opts)
  exportlens().trust(0, opts.args)
end, {
  nargs = '?',
  complete = 'dir',
  desc = 'exportlens: let the server run the code of this workspace (or of a folder) and export it now',
})
