"""One module per LSP feature (a package for a large one, such as ``hover``); each has
``register(server)``, and reaches the server only through ``exportlens.server.host.Host``."""
