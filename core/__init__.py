"""exportlens.core: finding, exporting and analysing models. No LSP, no asyncio.

Only the modules that run inside the export worker import torch (``extract``,
``analyze_torch``, ``job``, ``zygote``); everything else here is torch-free so the
CLI front end and the language server can use it.
"""
