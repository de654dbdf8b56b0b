"""The export contract: each target's signature recorded in ``exportlens.snapshot.json``
at the project root, and every later export compared against it. Torch-free: the
CLI and the language server compare, through ``exportlens.core.pipeline``.

- ``snapshot``: the file's format (read, validate, write deterministically) and the
  recorded form of a signature, with dims named as the user declared them;
- ``compare``: the breaking and compatible rules, one pure function over two
  recorded signatures;
- ``check``: a file's result against the snapshot, as ``signature-changed``
  diagnostics at the lines of the specs that changed.
"""
