--- No server needed: the LSP config resolves from the runtimepath and merges with
--- the user's `vim.lsp.config()`; the help file's tags build and every tag and
--- link in it opens (`:help exportlens` and friends).

return function(T)
  -- The config file as shipped, and as Neovim resolves it merged with init.lua's.
  local file = vim.api.nvim_get_runtime_file('lsp/exportlens.lua', false)[1]
  T.need('lsp/exportlens.lua is on the runtimepath', file ~= nil, vim.o.runtimepath)
  local shipped = dofile(file)
  T.check('the shipped cmd is python3 -P -m exportlens serve', vim.deep_equal(shipped.cmd, { 'python3', '-P', '-m', 'exportlens', 'serve' }), shipped.cmd)
  local config = vim.lsp.config.exportlens
  T.check('vim.lsp.config resolves exportlens', config ~= nil)
  T.check('filetypes and root markers', vim.deep_equal(config.filetypes, { 'python' }) and vim.deep_equal(config.root_markers, { 'pyproject.toml', '.git' }), config)
  T.check("the user's cmd wins", config.cmd[1] == T.env('EXPORTLENS_NVIM_PYTHON'), config.cmd)
  T.check("the user's settings merge into the shipped sections", config.init_options.exportlens.debounceMs == 100
    and config.settings.exportlens.workers == 1, { init_options = config.init_options, settings = config.settings })
  T.check('empty sections are sent as JSON objects, not arrays', vim.json.encode(shipped.settings) == '{"exportlens":{}}', vim.json.encode(shipped.settings))
  T.check('vim.lsp.enable marked it enabled', vim.lsp.is_enabled('exportlens'))

  -- The user commands exist (plugin/exportlens.lua ran at startup).
  local commands = vim.api.nvim_get_commands({})
  for _, name in ipairs({ 'ExportlensReexport', 'ExportlensGraph', 'ExportlensGraphPage', 'ExportlensNodes', 'ExportlensShowGraph', 'ExportlensClearCache', 'ExportlensTrust' }) do
    T.check(':' .. name .. ' is defined', commands[name] ~= nil)
  end

  -- Help: build the tags (as a plugin manager does), then open every tag and link.
  local doc = vim.api.nvim_get_runtime_file('doc/exportlens.txt', false)[1]
  T.need('doc/exportlens.txt is on the runtimepath', doc ~= nil)
  local built, err = pcall(vim.cmd.helptags, vim.fn.fnameescape(vim.fs.dirname(doc)))
  T.need(':helptags accepts doc/exportlens.txt (no duplicate or bad tags)', built, err)
  local text = table.concat(vim.fn.readfile(doc), '\n')
  local tags, links = {}, {}
  for tag in text:gmatch('%*([^%s*|]+)%*') do
    tags[#tags + 1] = tag
  end
  for link in text:gmatch('|([^%s|]+)|') do
    links[#links + 1] = link
  end
  T.need('the help file has tags and links', #tags >= 10 and #links >= 5, { tags = tags, links = links })
  for _, tag in ipairs(tags) do
    local ok, open_err = pcall(vim.cmd.help, tag)
    local here = ok and vim.api.nvim_buf_get_name(0) or ''
    T.check((':help %s opens exportlens.txt'):format(tag), ok and vim.fs.basename(here) == 'exportlens.txt', open_err or here)
  end
  for _, link in ipairs(links) do
    local ok, open_err = pcall(vim.cmd.help, link)
    T.check(('the link |%s| resolves'):format(link), ok, open_err)
  end
  pcall(vim.cmd.helpclose)
end
