"""The worker's warm-up imports everything a successful export's job runs: a job
forked from it imports nothing of its own but the user's model (each module it
imported itself cost every save its import, ~60 ms for the extraction and encoder)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.server.lsp_client import EXAMPLES

PROBE = """
import json, os, sys
from exportlens.core.isolation.warmup import warm_up
warm_up()
from exportlens.core.export.job import run_job
from exportlens.core.model.request import ExportRequest
path = sys.argv[1]
before = set(sys.modules)
result = run_job(ExportRequest(id=1, path=path, source=open(path).read(), root=os.path.dirname(path)), lambda m: None)
print(json.dumps({"status": [t.status for t in result.targets], "imported": sorted(set(sys.modules) - before)}))
"""


def test_a_successful_job_imports_only_the_model(tmp_path: Path) -> None:
    model = tmp_path / "counter.py"
    model.write_text((EXAMPLES / "counter.py").read_text())
    out = subprocess.run([sys.executable, "-c", PROBE, str(model)], capture_output=True, text=True, check=True, timeout=600)
    found = json.loads(out.stdout.splitlines()[-1])
    assert found["status"] == ["ok"]
    assert found["imported"] == ["counter"]
