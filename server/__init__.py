"""exportlens.server: the language server (pygls). Never imports torch."""
