"""exportlens.core: finding, exporting and analysing models. No LSP, no asyncio but
``watch``'s (the watcher hands its events to the caller's event loop), and nothing
here imports the ``exportlens`` package above it.

Which subpackages import torch:

- ``model``, ``source``, ``project``, ``cache``, ``disk``, ``trace``, ``watch``,
  ``pipeline``: never (the CLI and the language server use them).
- ``isolation``: the pool side (``pool``, ``messages``, ``pipes``) never; the zygote
  and the job process import torch once, in the worker process.
- ``serde``: ``schema``, ``codec`` and the torch-free ``reader`` never; ``encode``,
  ``decode``, ``rebuild``, ``expressions``, ``weights`` and ``validate`` do.
- ``export``: runs in the job process and imports torch (``registry`` excepted: the
  decorator's record, which user code reaches through ``exportlens.target``).
"""
