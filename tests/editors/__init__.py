"""Tests that drive real editors (VS Code through code-server, Neovim) with the built clients."""
