---@brief
---
--- https://github.com/exportlens/exportlens
---
--- exportlens: live `torch.export` feedback. The server exports every model a
--- Python file declares (in warm worker processes) and shows export errors, banned
--- mutations and the graph signature at your own lines: diagnostics (source
--- `exportlens`, code = a code of docs/diagnostics.md such as `data-dependent` or
--- `mutation/buffer`) and `InputSpec`/`OutputSpec` hovers.
---
--- Install the server into the Python environment that has torch:
--- ```sh
--- pip install -e path/to/exportlens      # or: pip install exportlens
--- ```
--- Add `editors/nvim` of the repository to your 'runtimepath' (or use
--- nvim-lspconfig >= 2, which merges `lsp/` configs from the runtimepath) and enable it:
--- ```lua
--- vim.lsp.enable('exportlens')
--- ```
--- The default command is `python3 -P -m exportlens serve` (`-P`, Python 3.11+: the
--- project folder, where the server runs, is not put on `sys.path`, so a project file
--- named like a library, `tokenize.py` or `attr.py`, cannot stand in for it). Point it
--- at the interpreter of your project's environment when that is not the `python3` on
--- $PATH:
--- ```lua
--- vim.lsp.config('exportlens', {
---   cmd = { vim.fn.expand('~/proj/.venv/bin/python'), '-P', '-m', 'exportlens', 'serve' },
---   settings = { exportlens = { debounceMs = 500, timeoutS = 60 } },
--- })
--- ```
--- Settings (section `exportlens`, snake_case or camelCase): `debounceMs`, `timeoutS`,
--- `memoryMb`, `workers`, `cache`, `cacheDir`, `cacheUrl` (the shared cache), `cacheWrite`, `strict`, `lower` (`{ 'onnx' }`, `{ 'executorch' }`), `weights` (`'auto'`, `'real'`), `inlayHints`, `diagnostics`
--- (a map of code to false, or a list of codes to hide). `timeoutS`, `memoryMb`, `strict`, `lower`, `weights` set here
--- override `[tool.exportlens]` in pyproject.toml, so leave them unset to use the project's.
--- `inlayHints = false` turns the dtype/shape inlay hints off (in the server and in the
--- plugin, which otherwise enables them on attach); code lenses are fetched on attach
--- and on the server's refresh (`vim.lsp.codelens.run()` runs one), quick fixes come
--- through `vim.lsp.buf.code_action()`.
--- The server runs no code of a folder until you trust it: `exportlens trust FOLDER` in
--- a shell, or `:ExportlensTrust` (the quick fix on its `untrusted-folder` note runs it).
--- Commands `:ExportlensReexport`, `:ExportlensGraph`, `:ExportlensNodes`,
--- `:ExportlensShowGraph`, `:ExportlensClearCache`, `:ExportlensTrust` and
--- `:checkhealth exportlens` come with the plugin; see `:help exportlens`.

---@type vim.lsp.Config
return {
  cmd = { 'python3', '-P', '-m', 'exportlens', 'serve' },
  filetypes = { 'python' },
  root_markers = { 'pyproject.toml', '.git' },
  -- Empty maps (not lists) so the server sees `{}` when nothing is configured.
  init_options = { exportlens = vim.empty_dict() },
  settings = { exportlens = vim.empty_dict() },
  -- The server tells the client when a result changed the lenses; Neovim fetches
  -- them only when asked (lua/exportlens/features.lua asks).
  capabilities = { workspace = { codeLens = { refreshSupport = true } } },
  handlers = {
    ['workspace/codeLens/refresh'] = function(...)
      return require('exportlens.features').on_codelens_refresh(...)
    end,
    -- Neovim's own handler can leave the new hints undrawn (lua/exportlens/features.lua).
    ['workspace/inlayHint/refresh'] = function(...)
      return require('exportlens.features').on_inlay_hint_refresh(...)
    end,
  },
}
