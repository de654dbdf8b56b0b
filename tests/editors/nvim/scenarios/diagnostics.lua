--- Open two model files: the diagnostics Neovim shows must be exactly the ones
--- `exportlens check --format json` reports (code, severity, range, message).
--- Then edit both buffers (fix one data-dependent branch; introduce one through a
--- non-ASCII name, compared with the CLI's diagnostics for that text; undo it): the
--- diagnostics follow each new version, at the edited lines. Then change settings
--- at runtime (didChangeConfiguration) and check $/progress reached the client.

local lsp = require('exportlens_test.lsp')

return function(T)
  local expected = T.expected()
  local files = expected.files

  local counter = lsp.open(T, 'counter.py')
  local client = lsp.client(T, counter)
  T.check('the server negotiated a position encoding', client.offset_encoding ~= nil, client.offset_encoding)
  T.check(
    'push diagnostics (Neovim cannot be asked to re-pull, so the server must not offer pull)',
    client.server_capabilities.diagnosticProvider == nil,
    client.server_capabilities.diagnosticProvider
  )
  local gate = lsp.open(T, 'data_dependent.py')

  for name, buf in pairs({ ['counter.py'] = counter, ['data_dependent.py'] = gate }) do
    local want = files[name]
    T.need('the CLI reported diagnostics for ' .. name, type(want) == 'table' and #want > 0, want)
    local got = lsp.wait_current(T, buf, lsp.FIRST_EXPORT_MS)
    T.check(name .. ': the same diagnostics as the CLI', got ~= nil and vim.deep_equal(got, want), {
      got = got or lsp.diagnostics(buf),
      want = want,
    })
  end

  -- Fix the first branch of data_dependent.py: one data-dependent error is left,
  -- on the line of the second branch (which moved up by one).
  local first = lsp.line_of(gate, 'if x.sum() > 0:')
  T.need('data_dependent.py has the `if x.sum() > 0:` branch', first ~= nil)
  local before = lsp.version(gate)
  vim.api.nvim_buf_set_lines(gate, first, first + 2, false, { '        x = x + 1' })
  T.check('the edit is a new version', lsp.version(gate) > before, { before = before, after = lsp.version(gate) })
  local second = lsp.line_of(gate, 'if x.max() > 3:')
  local fixed = lsp.wait_current(T, gate, lsp.EXPORT_MS)
  T.check('data_dependent.py after the fix: one data-dependent error at the remaining branch', fixed ~= nil
    and #fixed == 1
    and fixed[1].code == 'data-dependent'
    and fixed[1].severity == vim.diagnostic.severity.ERROR
    and fixed[1].lnum == second, { got = fixed and lsp.summary(fixed) or lsp.summary(lsp.diagnostics(gate)), line = second })

  -- Break counter.py: a branch on a tensor value, through a non-ASCII name (the
  -- columns of that line differ between UTF-8 and UTF-16). Neovim must show what
  -- the CLI reports for that text, at the same byte columns.
  vim.api.nvim_set_current_buf(counter)
  local original = vim.api.nvim_buf_get_lines(counter, 0, -1, false)
  local variant = expected.variants['counter.py']
  local branched = vim.split(variant.text, '\n', { plain = true })
  if branched[#branched] == '' then
    table.remove(branched)
  end
  vim.api.nvim_buf_set_lines(counter, 0, -1, false, branched)
  local branch = lsp.line_of(counter, 'if größe > 0:')
  local broken = lsp.wait_current(T, counter, lsp.EXPORT_MS)
  T.check('counter.py with a new branch: the CLI diagnostics for that text', broken ~= nil and vim.deep_equal(broken, variant.diagnostics), {
    got = broken or lsp.diagnostics(counter),
    want = variant.diagnostics,
  })
  T.check('counter.py with a new branch: data-dependent at that branch', broken ~= nil
    and #broken == 1
    and broken[1].code == 'data-dependent'
    and broken[1].lnum == branch
    and broken[1].severity == vim.diagnostic.severity.ERROR, { got = broken and lsp.summary(broken), line = branch })

  -- The underline covers the branch statement, non-ASCII name included (columns
  -- are bytes in Neovim; a character count would cut `> 0:` off).
  local branch_text = vim.api.nvim_buf_get_lines(counter, branch, branch + 1, false)[1]
  local underlined = broken and #broken == 1 and branch_text:sub(broken[1].col + 1, broken[1].end_col) or nil
  T.check('the branch diagnostic underlines exactly `if größe > 0:`', underlined == 'if größe > 0:', { underlined = underlined, line = branch_text })

  -- Undo by restoring the text: back to exactly what the CLI reports.
  vim.api.nvim_buf_set_lines(counter, 0, -1, false, original)
  local restored = lsp.wait_current(T, counter, lsp.EXPORT_MS)
  T.check('counter.py restored: the CLI diagnostics again', restored ~= nil and vim.deep_equal(restored, expected.files['counter.py']), {
    got = restored or lsp.diagnostics(counter),
    want = expected.files['counter.py'],
  })

  -- Settings changed at runtime, the Neovim way: edit client.settings and notify.
  -- Turning a code off re-publishes without it; a bad value is reported, not fatal.
  local function publishes()
    local uri = vim.uri_from_bufnr(counter)
    return #vim.tbl_filter(function(p)
      return p.uri == uri
    end, T.events.publishes)
  end
  local function configure(section)
    client.settings = vim.tbl_deep_extend('force', client.settings or {}, { exportlens = section })
    client:notify('workspace/didChangeConfiguration', { settings = client.settings })
  end
  local count = publishes()
  configure({ diagnostics = { ['mutation/buffer'] = false } })
  local hidden = T.wait(lsp.REQUEST_MS, function()
    return publishes() > count and #lsp.diagnostics(counter) == 0
  end)
  T.check('settings: diagnostics = { mutation/buffer = false } hides it', hidden, lsp.diagnostics(counter))
  count = publishes()
  local notes = #T.events.notifications
  configure({ diagnostics = { ['mutation/buffer'] = true }, debounceMs = 'soon' })
  local shown = T.wait(lsp.REQUEST_MS, function()
    return publishes() > count and vim.deep_equal(lsp.diagnostics(counter), expected.files['counter.py'])
  end)
  T.check('settings: turning it back on shows it again', shown, lsp.diagnostics(counter))
  local warned = T.wait(lsp.REQUEST_MS, function()
    for i = notes + 1, #T.events.notifications do
      if T.events.notifications[i].message:find('exportlens.debounceMs: expected a number', 1, true) then
        return T.events.notifications[i]
      end
    end
  end)
  T.check('settings: a bad value is shown as a warning', warned ~= nil and warned.level == vim.log.levels.WARN, T.events.notifications)

  -- Work-done progress reached the client: begun by exportlens, ended with a summary.
  local begun = vim.tbl_filter(function(p)
    return p.kind == 'begin' and p.title == 'exportlens'
  end, T.events.progress)
  local ended = vim.tbl_filter(function(p)
    return p.kind == 'end' and type(p.message) == 'string' and p.message:find('counter.py', 1, true) ~= nil
  end, T.events.progress)
  T.check('$/progress: exportlens begins and ends an export of counter.py', #begun > 0 and #ended > 0, T.events.progress)

  -- Published versions never go back for a document.
  local last = {}
  local backwards = {}
  for _, p in ipairs(T.events.publishes) do
    if p.version ~= vim.NIL then
      if last[p.uri] and p.version < last[p.uri] then
        backwards[#backwards + 1] = p
      end
      last[p.uri] = p.version
    end
  end
  T.check('published versions only move forward', #backwards == 0, backwards)
end
