"""The content-addressed result cache: its keys, its store, atomic writes. Torch-free."""
