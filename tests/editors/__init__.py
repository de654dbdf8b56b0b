"""Tests that drive real editors with the built clients (VS Code through code-server, Neovim) and as plain LSP clients (Emacs with eglot, Vim with ALE)."""
