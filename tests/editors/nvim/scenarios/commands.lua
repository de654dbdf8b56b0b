--- The plugin's user commands against the real server: clear messages without a
--- client, :ExportlensShowGraph (scratch buffer, target argument and completion,
--- unknown target), :ExportlensClearCache (reports what the cache folder held),
--- :ExportlensReexport (exports again and re-publishes).

local lsp = require('exportlens_test.lsp')

return function(T)
  local graph = require('exportlens.graph')

  -- No client yet, and an unnamed buffer: each command says so, nothing breaks.
  vim.cmd.enew()
  for _, command in ipairs({ 'ExportlensReexport', 'ExportlensGraph', 'ExportlensGraphPage', 'ExportlensNodes', 'ExportlensShowGraph', 'ExportlensClearCache' }) do
    local from = #T.events.notifications
    local ok, err = pcall(vim.cmd, command)
    local said = lsp.notification(T, from, 'no exportlens language server is attached')
    T.check((':%s without a client says so'):format(command), ok and said ~= nil and said.level == vim.log.levels.WARN, {
      error = err,
      notifications = T.events.notifications,
    })
  end

  local buf = lsp.open(T, 'counter.py')
  local client = lsp.client(T, buf)
  local exported = lsp.wait_current(T, buf, lsp.FIRST_EXPORT_MS)
  T.need('counter.py was exported', exported ~= nil, T.events.publishes)
  local source_win = vim.api.nvim_get_current_win()

  -- :ExportlensShowGraph: a read-only python scratch buffer with the server's text.
  local direct = client:request_sync('workspace/executeCommand', { command = 'exportlens.showGraph', arguments = { vim.uri_from_bufnr(buf) } }, lsp.REQUEST_MS, buf)
  local text = direct and direct.result
  T.need('exportlens.showGraph returns the graph text', type(text) == 'string' and text:find('def forward(', 1, true) ~= nil, direct)
  vim.cmd('ExportlensShowGraph')
  local name = graph.buffer_name(vim.api.nvim_buf_get_name(buf), nil)
  local graph_buf = T.wait(lsp.REQUEST_MS, function()
    return lsp.buffer_named(name)
  end)
  T.need(':ExportlensShowGraph opens ' .. name, graph_buf ~= nil, vim.tbl_map(vim.api.nvim_buf_get_name, vim.api.nvim_list_bufs()))
  local lines = vim.api.nvim_buf_get_lines(graph_buf, 0, -1, false)
  T.check('the graph buffer holds the graph text', table.concat(lines, '\n') == text, { lines = lines, text = text })
  T.check('the graph shows `# Counter` and `def forward(`', lines[1] == '# Counter' and lsp.line_of(graph_buf, 'def forward(') ~= nil, lines)
  local bo = vim.bo[graph_buf]
  T.check('the graph buffer is a read-only python scratch buffer', bo.filetype == 'python'
    and bo.buftype == 'nofile'
    and not bo.modifiable
    and bo.readonly
    and not bo.modified, { filetype = bo.filetype, buftype = bo.buftype, modifiable = bo.modifiable, readonly = bo.readonly })
  T.check('the graph buffer is shown in the current (split) window', vim.api.nvim_get_current_buf() == graph_buf
    and vim.api.nvim_win_get_config(0).relative == ''
    and vim.api.nvim_win_is_valid(source_win), vim.api.nvim_list_wins())
  T.check('no language server attaches to the graph buffer', #vim.lsp.get_clients({ bufnr = graph_buf }) == 0, vim.lsp.get_clients({ bufnr = graph_buf }))

  vim.api.nvim_set_current_win(source_win)
  local completions = vim.fn.getcompletion('ExportlensShowGraph ', 'cmdline')
  T.check(':ExportlensShowGraph completes the target names', vim.deep_equal(completions, { 'Counter' }), completions)
  vim.cmd('ExportlensShowGraph Counter')
  local named = graph.buffer_name(vim.api.nvim_buf_get_name(buf), 'Counter')
  local target_buf = T.wait(lsp.REQUEST_MS, function()
    return lsp.buffer_named(named)
  end)
  T.check(':ExportlensShowGraph Counter shows that target', target_buf ~= nil
    and table.concat(vim.api.nvim_buf_get_lines(target_buf, 0, -1, false), '\n') == text, named)

  vim.api.nvim_set_current_win(source_win)
  local from = #T.events.notifications
  vim.cmd('ExportlensShowGraph Nope')
  local unknown = T.wait(lsp.REQUEST_MS, function()
    return lsp.notification(T, from, "no target 'Nope'")
  end)
  T.check(':ExportlensShowGraph Nope reports the unknown target as an error', unknown ~= nil and unknown.level == vim.log.levels.ERROR, T.events.notifications)

  -- :ExportlensClearCache reports the number of results the cache folder held.
  local held = T.wait(lsp.REQUEST_MS, function()
    local n = lsp.cache_entries(T)
    return n > 0 and n or nil
  end)
  T.need('the export was stored in the cache folder', held ~= nil, T.env('EXPORTLENS_CACHE_DIR'))
  from = #T.events.notifications
  vim.cmd('ExportlensClearCache')
  local cleared = T.wait(lsp.REQUEST_MS, function()
    return lsp.notification(T, from, 'removed %d+ cached result')
  end)
  local count = cleared and tonumber(cleared.message:match('removed (%d+) cached result'))
  T.check(':ExportlensClearCache reports the number of results removed', count == held, { held = held, said = cleared })
  T.check('the cache folder has no results left', lsp.cache_entries(T) == 0, lsp.cache_entries(T))
  from = #T.events.notifications
  vim.cmd('ExportlensClearCache')
  local again = T.wait(lsp.REQUEST_MS, function()
    return lsp.notification(T, from, 'removed %d+ cached result')
  end)
  T.check('a second :ExportlensClearCache removes 0', again ~= nil and again.message:find('removed 0 cached results', 1, true) ~= nil, again)

  -- :ExportlensReexport exports again (not from the cache) and publishes again.
  local published = lsp.publishes_for(T, buf)
  from = #T.events.notifications
  vim.cmd('ExportlensReexport')
  local done = T.wait(lsp.EXPORT_MS, function()
    return lsp.notification(T, from, 'exported again')
  end)
  T.check(':ExportlensReexport reports the new state', done ~= nil and done.message:find('ok, 0 errors (Counter ok)', 1, true) ~= nil, done)
  T.check(':ExportlensReexport re-publishes the diagnostics', lsp.publishes_for(T, buf) > published
    and vim.deep_equal(lsp.diagnostics(buf), exported), { before = published, after = lsp.publishes_for(T, buf), now = lsp.diagnostics(buf), was = exported })
  T.check('the re-export was stored in the emptied cache again', T.wait(lsp.REQUEST_MS, function()
    return lsp.cache_entries(T) > 0
  end), lsp.cache_entries(T))
end
