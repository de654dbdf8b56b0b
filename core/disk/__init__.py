"""Files on disk, below every other package of core: a file's state now (``states``:
its bytes' hash, its metadata, a library unit's content, "absent"), where exportlens's
own code lies (``own``), and a write a reader never sees half done (``atomic``).
Torch-free; imports nothing of exportlens."""
