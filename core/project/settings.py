"""``[tool.exportlens]``: one settings type, one default per setting."""

from __future__ import annotations

DEFAULT_TIMEOUT_S = 120.0  # seconds per target, wall clock
DEFAULT_MEMORY_MB = 8192  # resident memory cap of one export job
