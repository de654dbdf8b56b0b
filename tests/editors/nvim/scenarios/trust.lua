--- A folder the user has not trusted (the server's trust record is empty): opening
--- counter.py runs nothing -- the `untrusted-folder` note on line 1, one message saying
--- how to trust it, and the note's code action runs `exportlens.trust` -- then
--- :ExportlensTrust trusts the workspace and the file exports without a restart,
--- with the CLI's diagnostics.

local lsp = require('exportlens_test.lsp')

return function(T)
  local expected = T.expected()
  local buf = lsp.open(T, 'counter.py')
  local client = lsp.client(T, buf)

  local notice = lsp.wait_current(T, buf, lsp.REQUEST_MS * 2)
  T.need('an untrusted folder shows only the untrusted-folder note', notice ~= nil and #notice == 1 and notice[1].code == 'untrusted-folder'
    and notice[1].lnum == 0 and notice[1].severity == vim.diagnostic.severity.INFO, notice or lsp.diagnostics(buf))
  local told = T.wait(lsp.REQUEST_MS, function()
    for _, n in ipairs(T.events.notifications) do
      if n.message:find('exportlens trust', 1, true) and n.message:find('exportlens.trust', 1, true) then
        return n
      end
    end
    return nil
  end)
  T.check('the user is told how to trust the folder', told ~= nil, T.events.notifications)
  local status = client:request_sync('workspace/executeCommand', { command = 'exportlens.status', arguments = { vim.uri_from_bufnr(buf) } }, lsp.REQUEST_MS, buf)
  T.check('no worker started in the untrusted folder', status and status.result and status.result.workers == 'not-started', status)

  -- The note's code action: a quick fix whose command is exportlens.trust.
  local d = vim.diagnostic.get(buf)[1]
  local params = {
    textDocument = { uri = vim.uri_from_bufnr(buf) },
    range = { start = { line = d.lnum, character = d.col }, ['end'] = { line = d.end_lnum, character = d.end_col } },
    context = { diagnostics = { d.user_data and d.user_data.lsp or {} } },
  }
  local answer = client:request_sync('textDocument/codeAction', params, lsp.REQUEST_MS, buf)
  local actions = answer and answer.result or {}
  T.check("the note's code action runs exportlens.trust", #actions == 1 and actions[1].command and actions[1].command.command == 'exportlens.trust', actions)

  vim.cmd('ExportlensTrust')
  local got = T.wait(lsp.FIRST_EXPORT_MS, function()
    local now = lsp.diagnostics(buf)
    return (#now > 0 and now[1].code ~= 'untrusted-folder') and now or nil
  end)
  T.check(':ExportlensTrust exports the file with the CLI\'s diagnostics', got ~= nil and vim.deep_equal(got, expected.files['counter.py']), {
    got = got or lsp.diagnostics(buf),
    want = expected.files['counter.py'],
  })
  local said = T.wait(lsp.REQUEST_MS, function()
    for _, n in ipairs(T.events.notifications) do
      if n.message:find('exportlens: trusted ', 1, true) then
        return n
      end
    end
    return nil
  end)
  T.check(':ExportlensTrust says what it trusted', said ~= nil, T.events.notifications)
end
