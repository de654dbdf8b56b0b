-- User commands for the exportlens language server (see :help exportlens).
-- The server itself is configured by lsp/exportlens.lua and started by
-- vim.lsp.enable('exportlens'); these commands talk to the client attached to the
-- current buffer.

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

vim.api.nvim_create_user_command('ExportlensClearCache', function()
  exportlens().clear_cache(0)
end, { nargs = 0, desc = 'exportlens: empty the result cache' })
