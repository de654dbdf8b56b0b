--- Inlay hints, code lenses and the graph view against the real server, on a model
--- whose class lives in its own module: net.py declares `model = Block()` with a
--- dynamic batch, layers.py holds `class Block` and declares nothing.
---
--- Hints and lenses as Neovim holds them and as it draws them (extmarks); the lenses
--- refetched when the server says they changed; both lens commands run with
--- `vim.lsp.codelens.run()`; the graph view's <CR>/gd landing on the source line in
--- the window the view came from; `:ExportlensNodes` listing a line's nodes.

local lsp = require('exportlens_test.lsp')

--- Run the code lens titled like `pattern` on the cursor's line, choosing it in
--- vim.ui.select as a user would; the titles offered.
local function run_lens(pattern)
  local offered = {}
  local select = vim.ui.select
  vim.ui.select = function(items, opts, on_choice)
    for _, item in ipairs(items) do
      offered[#offered + 1] = opts.format_item(item)
    end
    for _, item in ipairs(items) do
      if opts.format_item(item):find(pattern) then
        return on_choice(item)
      end
    end
    on_choice(nil)
  end
  local ok, err = pcall(vim.lsp.codelens.run)
  vim.ui.select = select
  assert(ok, err)
  return offered
end

--- Press `keys` (with the buffer's mappings) in the current window.
local function press(keys)
  vim.api.nvim_feedkeys(vim.keycode(keys), 'mx', false)
end

local function lens_with(lenses, command, pattern)
  for _, l in ipairs(lenses) do
    if l.command == command and l.title:find(pattern) then
      return l
    end
  end
  return nil
end

return function(T)
  local view = require('exportlens.view')

  -- net.py: the target. Its lenses sit on the `model = Block()` line.
  local net = lsp.open(T, 'net.py')
  local client = lsp.client(T, net)
  T.need('net.py was exported', lsp.wait_current(T, net, lsp.FIRST_EXPORT_MS) ~= nil, T.events.publishes)
  T.check('inlay hints are enabled for the exportlens buffer', vim.lsp.inlay_hint.is_enabled({ bufnr = net }))
  local model_line = lsp.line_of(net, 'model = Block()')
  local lenses = T.wait(lsp.REQUEST_MS, function()
    local found = lsp.lenses(net)
    return lens_with(found, 'exportlens.graph', '^Show graph$') and found or nil
  end)
  T.need('net.py: code lenses arrive', lenses ~= nil, { lenses = lsp.lenses(net), refreshes = T.events.lens_refreshes })
  local status = lens_with(lenses, 'exportlens.reexport', '^✓ Block exported in %d+ ms')
  T.check('net.py: a status lens `✓ Block exported in N ms · 1 input → 1 output` on the `model = Block()` line', status ~= nil
    and status.line == model_line
    and status.title:find('1 input → 1 output', 1, true) ~= nil
    and vim.deep_equal(status.arguments, { vim.uri_from_bufnr(net) }), lenses)
  local graph_lens = lens_with(lenses, 'exportlens.graph', '^Show graph$')
  T.check('net.py: a `Show graph` lens on that line, for target Block', graph_lens.line == model_line
    and vim.deep_equal(graph_lens.arguments, { { uri = vim.uri_from_bufnr(net), target = 'Block' } }), graph_lens)
  local drawn = T.wait(lsp.REQUEST_MS, function()
    local text = lsp.drawn_lenses(net, client)[model_line]
    return text and text:find('Show graph', 1, true) and text or nil
  end)
  T.check('net.py: the lenses are drawn on the `model = Block()` line', drawn ~= nil and drawn:find('✓ Block exported', 1, true) ~= nil, lsp.drawn_lenses(net, client))
  T.check('the server asked for a lens refresh and the plugin took it', #T.events.lens_refreshes > 0, T.events)

  -- :ExportlensGraph in net.py: every node of Block; a row jumps to layers.py.
  local net_win = vim.api.nvim_get_current_win()
  vim.cmd('ExportlensGraph')
  local net_view = T.wait(lsp.REQUEST_MS, function()
    return lsp.buffer_named(view.buffer_name(vim.api.nvim_buf_get_name(net), nil))
  end)
  T.need(':ExportlensGraph opens the graph view', net_view ~= nil, vim.tbl_map(vim.api.nvim_buf_get_name, vim.api.nvim_list_bufs()))
  local rows = vim.api.nvim_buf_get_lines(net_view, 0, -1, false)
  T.check('the graph view lists each node with its op, dtype/shape and source', lsp.line_of(net_view, 'aten.linear.default') ~= nil
    and table.concat(rows, '\n'):find('linear%s+aten%.linear%.default%s+float32%[batch, 16%]%s+layers%.py:13') ~= nil, rows)
  local vbo = vim.bo[net_view]
  T.check('the graph view is a read-only scratch buffer in a split', vbo.buftype == 'nofile' and not vbo.modifiable
    and vbo.filetype == 'exportlens-graph' and vim.api.nvim_get_current_buf() == net_view
    and vim.api.nvim_win_get_config(0).relative == '' and vim.api.nvim_win_is_valid(net_win), { buftype = vbo.buftype, filetype = vbo.filetype })
  T.check('no language server attaches to the graph view', #vim.lsp.get_clients({ bufnr = net_view }) == 0)
  local linear_row = lsp.line_of(net_view, 'aten.linear.default')
  vim.api.nvim_win_set_cursor(0, { linear_row + 1, 0 })
  press('<CR>')
  local layers = lsp.buffer_named(vim.fs.joinpath(T.env('EXPORTLENS_NVIM_PROJECT'), 'layers.py'))
  T.need('<CR> on the linear row of net.py\'s graph opens layers.py', layers ~= nil, vim.tbl_map(vim.api.nvim_buf_get_name, vim.api.nvim_list_bufs()))
  local proj_line = lsp.line_of(layers, 'h = self.proj(x)')
  T.check("<CR> lands on `h = self.proj(x)` in layers.py, in net.py's window", vim.api.nvim_get_current_win() == net_win
    and vim.api.nvim_get_current_buf() == layers
    and vim.api.nvim_win_get_cursor(0)[1] == proj_line + 1, {
      win = vim.api.nvim_get_current_win(), net_win = net_win,
      buf = vim.api.nvim_buf_get_name(0), cursor = vim.api.nvim_win_get_cursor(0), want = proj_line + 1,
    })
  T.check('the jump is on the jump list (<C-o> returns to net.py)', (function()
    press('<C-o>')
    local back = vim.api.nvim_get_current_buf() == net
    press('<C-i>')
    return back
  end)(), vim.api.nvim_buf_get_name(0))

  -- layers.py, the model module: hints and lenses where the code is.
  lsp.client(T, layers)
  local hints = T.wait(lsp.EXPORT_MS, function()
    for _, h in ipairs(lsp.hints(layers)) do
      if h.line == proj_line then
        return lsp.hints(layers)
      end
    end
  end)
  T.need('layers.py (a model module): inlay hints arrive', hints ~= nil, lsp.hints(layers))
  local proj_hint = vim.tbl_filter(function(h)
    return h.line == proj_line
  end, hints)[1]
  local proj_text = vim.api.nvim_buf_get_lines(layers, proj_line, proj_line + 1, false)[1]
  T.check('layers.py: the hint after `h = self.proj(x)` is float32[batch, 16] (the Dim\'s name), at the end of the line', proj_hint.label == 'float32[batch, 16]'
    and proj_hint.character == #proj_text, { hint = proj_hint, line = proj_text })
  T.check("the hint's tooltip names the node, its op and torch's symbol for batch", proj_hint.tooltip ~= nil
    and proj_hint.tooltip:find('aten.linear.default', 1, true) ~= nil
    and proj_hint.tooltip:find('batch', 1, true) ~= nil
    and proj_hint.tooltip:find('s%d+') ~= nil, proj_hint.tooltip)
  local relu_line = lsp.line_of(layers, 'return torch.relu(h)')
  T.check('layers.py: `return torch.relu(h)` has its hint too', #vim.tbl_filter(function(h)
    return h.line == relu_line and h.label == 'float32[batch, 16]'
  end, hints) == 1, hints)
  local drawn_hints = T.wait(lsp.REQUEST_MS, function()
    for _, d in ipairs(lsp.drawn_hints(layers)) do
      if d.line == proj_line and d.text:find('float32[batch, 16]', 1, true) then
        return d
      end
    end
  end)
  T.check('layers.py: the hint is drawn as virtual text on that line', drawn_hints ~= nil, lsp.drawn_hints(layers))
  local class_line = lsp.line_of(layers, 'class Block(')
  local layer_lenses = T.wait(lsp.REQUEST_MS, function()
    local found = lsp.lenses(layers)
    return lens_with(found, 'exportlens.graph', '^Show graph$') and found or nil
  end)
  T.need('layers.py: code lenses arrive', layer_lenses ~= nil, lsp.lenses(layers))
  T.check('layers.py: the status and Show graph lenses sit on the `class Block` line', #vim.tbl_filter(function(l)
    return l.line == class_line
  end, layer_lenses) == 2 and lens_with(layer_lenses, 'exportlens.reexport', '^✓ Block exported') ~= nil, layer_lenses)

  -- Running the `Show graph` lens opens the view; gd on the relu row lands there.
  local layers_win = vim.api.nvim_get_current_win()
  vim.api.nvim_win_set_cursor(0, { class_line + 1, 0 })
  local offered = run_lens('^Show graph$')
  T.check('vim.lsp.codelens.run() offers both lenses of the line', #offered == 2, offered)
  local lens_view = T.wait(lsp.REQUEST_MS, function()
    local b = lsp.buffer_named(view.buffer_name(vim.api.nvim_buf_get_name(layers), 'Block'))
    return b and vim.api.nvim_get_current_buf() == b and b or nil
  end)
  T.need('running the `Show graph` lens opens the graph view of Block', lens_view ~= nil, vim.tbl_map(vim.api.nvim_buf_get_name, vim.api.nvim_list_bufs()))
  local relu_row = lsp.line_of(lens_view, 'aten.relu.default')
  vim.api.nvim_win_set_cursor(0, { relu_row + 1, 0 })
  press('gd')
  T.check('gd on the relu row lands on `return torch.relu(h)`', vim.api.nvim_get_current_win() == layers_win
    and vim.api.nvim_get_current_buf() == layers
    and vim.api.nvim_win_get_cursor(0)[1] == relu_line + 1, { buf = vim.api.nvim_buf_get_name(0), cursor = vim.api.nvim_win_get_cursor(0) })
  T.check('the lenses are drawn again after the lens ran', T.wait(lsp.REQUEST_MS, function()
    local text = lsp.drawn_lenses(layers, client)[class_line]
    return text and text:find('Show graph', 1, true)
  end), lsp.drawn_lenses(layers, client))

  -- The status lens exports again and says so.
  local from, published = #T.events.notifications, lsp.publishes_for(T, layers)
  vim.api.nvim_win_set_cursor(0, { class_line + 1, 0 })
  run_lens('^✓')
  local done = T.wait(lsp.EXPORT_MS, function()
    return lsp.notification(T, from, 'exported again')
  end)
  T.check('running the status lens exports again and reports it', done ~= nil and done.message:find('exported again: ok', 1, true) ~= nil, T.events.notifications)
  T.check('…and the diagnostics are published again', T.wait(lsp.REQUEST_MS, function()
    return lsp.publishes_for(T, layers) > published
  end), { before = published, after = lsp.publishes_for(T, layers) })

  -- :ExportlensNodes: what the cursor's line became.
  vim.api.nvim_win_set_cursor(0, { proj_line + 1, 4 })
  vim.cmd('ExportlensNodes')
  local nodes = T.wait(lsp.REQUEST_MS, function()
    return lsp.buffer_named(view.buffer_name(vim.api.nvim_buf_get_name(layers), ':' .. (proj_line + 1)))
  end)
  T.need(':ExportlensNodes opens the view of that line', nodes ~= nil, vim.tbl_map(vim.api.nvim_buf_get_name, vim.api.nvim_list_bufs()))
  local node_rows = vim.tbl_filter(function(l)
    return l ~= '' and not vim.startswith(l, '#')
  end, vim.api.nvim_buf_get_lines(nodes, 0, -1, false))
  T.check(':ExportlensNodes lists the line\'s one node: linear, aten.linear.default, float32[batch, 16]', #node_rows == 1
    and node_rows[1]:find('^linear%s+aten%.linear%.default%s+float32%[batch, 16%]%s+layers%.py:' .. (proj_line + 1) .. '$') ~= nil, node_rows)
  T.check("the nodes view's link is underlined", #vim.api.nvim_buf_get_extmarks(nodes, vim.api.nvim_get_namespaces()['exportlens.graph.links'], 0, -1, {}) == 1)
  press('<CR>')
  T.check(':ExportlensNodes\' row jumps back to its line', vim.api.nvim_get_current_buf() == layers
    and vim.api.nvim_win_get_cursor(0)[1] == proj_line + 1, vim.api.nvim_win_get_cursor(0))
  from = #T.events.notifications
  vim.api.nvim_win_set_cursor(0, { lsp.line_of(layers, 'import torch') + 1, 0 })
  vim.cmd('ExportlensNodes')
  local none = T.wait(lsp.REQUEST_MS, function()
    return lsp.notification(T, from, 'produced no nodes')
  end)
  T.check(':ExportlensNodes on `import torch` says the line produced no nodes', none ~= nil
    and lsp.buffer_named(view.buffer_name(vim.api.nvim_buf_get_name(layers), ':' .. (lsp.line_of(layers, 'import torch') + 1))) == nil, T.events.notifications)

  -- An unknown target is the server's error, said as one; `q` closes a view.
  from = #T.events.notifications
  vim.cmd('ExportlensGraph Nope')
  local unknown = T.wait(lsp.REQUEST_MS, function()
    return lsp.notification(T, from, 'exportlens.graph failed')
  end)
  T.check(':ExportlensGraph Nope reports the unknown target as an error', unknown ~= nil and unknown.level == vim.log.levels.ERROR
    and unknown.message:find('Nope', 1, true) ~= nil, T.events.notifications)
  local nodes_win = vim.fn.bufwinid(nodes)
  T.need('the nodes view is still shown', nodes_win ~= -1)
  vim.api.nvim_set_current_win(nodes_win)
  press('q')
  T.check('q closes the view', not vim.api.nvim_win_is_valid(nodes_win))

  -- :ExportlensGraphPage in net.py: the picture's address, opened with vim.ui.open; a
  -- node selected in the page (the POST the page sends for it) opens its line here,
  -- through the server's window/showDocument.
  vim.api.nvim_set_current_buf(net)
  local opened
  local ui_open = vim.ui.open
  vim.ui.open = function(url)
    opened = url
  end
  vim.cmd('ExportlensGraphPage')
  T.wait(lsp.REQUEST_MS, function()
    return opened
  end)
  vim.ui.open = ui_open
  T.need(":ExportlensGraphPage opens the page's loopback address", opened ~= nil and opened:find('^http://127%.0%.0%.1:%d+/[%w_-]+/%d+/$') ~= nil, opened)
  vim.system({ T.env('EXPORTLENS_NVIM_PYTHON'), '-c', 'import sys, urllib.request; urllib.request.urlopen(urllib.request.Request(sys.argv[1], method="POST"))',
    opened .. 'exportlens/open?model=0&node=linear' })
  local shown = T.wait(lsp.REQUEST_MS, function()
    return vim.api.nvim_get_current_buf() == layers and vim.api.nvim_win_get_cursor(0)[1] == proj_line + 1 or nil
  end)
  T.check("a node selected in the page opens its line: `h = self.proj(x)` in layers.py", shown == true,
    { buf = vim.api.nvim_buf_get_name(0), cursor = vim.api.nvim_win_get_cursor(0), want = proj_line + 1 })

  -- Since the page opened, the cursor follows into it: on `return torch.relu(h)` the
  -- server asks the page (its events, which the page polls) to select relu.
  local relu_line = lsp.line_of(layers, 'return torch.relu(h)')
  press(tostring(relu_line + 1) .. 'G')
  -- Neovim raises CursorMoved when its main loop next waits for a key, which a script
  -- waiting in vim.wait never lets it do: raised here as that loop would.
  vim.api.nvim_exec_autocmds('CursorMoved', { buffer = layers })
  local wish = T.wait(lsp.REQUEST_MS, function()
    local out = vim.system({ T.env('EXPORTLENS_NVIM_PYTHON'), '-c', 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1]).read().decode())',
      opened .. 'exportlens/events?after=-1' }):wait()
    local events = out.code == 0 and vim.json.decode(out.stdout) or nil
    return events ~= nil and type(events.select) == 'table' and events.select.nodes[1] == 'relu' and events or nil
  end)
  T.check('the cursor on `return torch.relu(h)` selects relu in the page', wish ~= nil, wish)

  -- An edit, saved (a model module is exported again when it is saved): the hints
  -- and the status lens follow the new export. Neovim draws hints only on the lines
  -- a window shows: one window, on the forward.
  vim.api.nvim_set_current_win(vim.fn.bufwinid(layers))
  vim.cmd.only()
  vim.api.nvim_win_set_cursor(0, { proj_line + 1, 0 })
  local init_line = lsp.line_of(layers, 'nn.Linear(8, 16)')
  local init_text = vim.api.nvim_buf_get_lines(layers, init_line, init_line + 1, false)[1]
  vim.api.nvim_buf_set_lines(layers, init_line, init_line + 1, false, { (init_text:gsub('nn%.Linear%(8, 16%)', 'nn.Linear(8, 32)')) })
  vim.cmd('silent write')
  T.wait(lsp.EXPORT_MS, function()
    for _, h in ipairs(lsp.hints(layers)) do
      if h.line == proj_line and h.label == 'float32[batch, 32]' then
        return true
      end
    end
  end)
  local widened = T.wait(lsp.REQUEST_MS, function()
    for _, d in ipairs(lsp.drawn_hints(layers)) do
      if d.line == proj_line and d.text:find('float32[batch, 32]', 1, true) then
        return d
      end
    end
  end)
  T.check('after `nn.Linear(8, 32)` the drawn hint says float32[batch, 32]', widened ~= nil, { hints = lsp.hints(layers), drawn = lsp.drawn_hints(layers) })
  local forward_line = lsp.line_of(layers, 'def forward(self, x):')
  vim.api.nvim_buf_set_lines(layers, forward_line + 1, forward_line + 1, false, { '        if x.sum() > 0:', '            x = x * 2' })
  vim.cmd('silent write')
  local failed = T.wait(lsp.EXPORT_MS, function()
    local text = lsp.drawn_lenses(layers, client)[class_line]
    return text and text:find('✗', 1, true) and text or nil
  end)
  T.check('after a branch on a tensor value the drawn status lens says the export failed', failed ~= nil
    and failed:find('data%-dependent') ~= nil, { lenses = lsp.lenses(layers), drawn = lsp.drawn_lenses(layers, client) })
end
