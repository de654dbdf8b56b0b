"""Hover markdown: inline code and fences that hold whatever backticks the text has."""

from __future__ import annotations

from exportlens.server.features.hover import markdown as md


def test_markdown_helpers_survive_backticks() -> None:
    assert md.code("a`b") == "``a`b``"
    assert md.code("`x") == "`` `x ``"
    fenced = md.fence(["```python", "x"])
    assert fenced.startswith("````text\n") and fenced.endswith("\n````")
