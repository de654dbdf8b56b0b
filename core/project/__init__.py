"""A project as exportlens sees it: ``[tool.exportlens]`` read once into one settings
type with one default per setting, the project root, and which files declare targets.
Torch-free."""
