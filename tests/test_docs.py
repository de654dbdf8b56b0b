"""Every diagnostic code has a section in docs/diagnostics.md, where the editor's link points."""

from __future__ import annotations

import re
from pathlib import Path

from exportlens.core.model.results import CODES, DOCS_URL, VARIABLE_SEVERITY, docs_anchor

DOCS = Path(__file__).resolve().parent.parent / "docs" / "diagnostics.md"


def test_every_code_has_its_anchor_and_heading() -> None:
    text = DOCS.read_text()
    anchors = set(re.findall(r'<a id="([^"]+)"></a>', text))
    for code, severity in CODES.items():
        anchor = docs_anchor(code).removeprefix(DOCS_URL + "#")
        assert anchor in anchors, code
        severities = " or ".join(VARIABLE_SEVERITY.get(code, (severity,)))
        assert f"## {code} ({severities})" in text, code
