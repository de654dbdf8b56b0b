"""A model file's source as text: its AST index, frames, lines and UTF-8 spans. Torch-free."""
