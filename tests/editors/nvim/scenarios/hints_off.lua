--- `settings.exportlens.inlayHints = false` (as a user's vim.lsp.config sets it, here
--- through $EXPORTLENS_NVIM_SETTINGS): the plugin does not enable inlay hints for the
--- buffer and the server answers `textDocument/inlayHint` with none, while the rest
--- (the export, its code lenses) goes on.

local lsp = require('exportlens_test.lsp')

return function(T)
  local layers = lsp.open(T, 'layers.py')
  local client = lsp.client(T, layers)
  T.need('the setting reached the client', client.settings.exportlens.inlayHints == false, client.settings)
  -- The status lens says the export is done: from then on the server has hints to give.
  local status = T.wait(lsp.FIRST_EXPORT_MS, function()
    for _, l in ipairs(lsp.lenses(layers)) do
      if l.title:find('Block exported', 1, true) then
        return l
      end
    end
  end)
  T.need('the lenses still come', status ~= nil, lsp.lenses(layers))
  T.check('inlayHints = false: the plugin leaves inlay hints off for the buffer', not vim.lsp.inlay_hint.is_enabled({ bufnr = layers }))
  local line = lsp.line_of(layers, 'h = self.proj(x)')
  local response = client:request_sync('textDocument/inlayHint', {
    textDocument = { uri = vim.uri_from_bufnr(layers) },
    range = { start = { line = 0, character = 0 }, ['end'] = { line = vim.api.nvim_buf_line_count(layers), character = 0 } },
  }, lsp.REQUEST_MS, layers)
  T.check('inlayHints = false: the server answers no hints', response ~= nil and response.err == nil
    and (response.result == nil or response.result == vim.NIL or #response.result == 0), { response = response, line = line })
  T.check('no hint is drawn', #lsp.drawn_hints(layers) == 0, lsp.drawn_hints(layers))
end
