--- Neovim connected to a server that is already listening (`exportlens serve --tcp`
--- with the token in init_options, or `--socket`), configured as docs/editors.md
--- shows: the same diagnostics as the CLI reach the buffer.

local lsp = require('exportlens_test.lsp')

return function(T)
  local expected = T.expected()
  local counter = lsp.open(T, 'counter.py')
  local client = lsp.client(T, counter)
  T.check('the client connects to the running server (cmd is a function)', type(client.config.cmd) == 'function', type(client.config.cmd))
  local want = expected.files['counter.py']
  T.need('the CLI reported diagnostics for counter.py', type(want) == 'table' and #want > 0, want)
  local got = lsp.wait_current(T, counter, lsp.FIRST_EXPORT_MS)
  T.check('counter.py over the socket: the same diagnostics as the CLI', got ~= nil and vim.deep_equal(got, want), {
    got = got or lsp.diagnostics(counter),
    want = want,
  })
end
