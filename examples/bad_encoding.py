"""A file whose bytes are not valid UTF-8 (syntax-error, as Python reports it)."""

GREETING = "café"
