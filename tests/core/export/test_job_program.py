"""Every exported target carries its program as msgpack, readable without torch."""

from __future__ import annotations

from pathlib import Path

from exportlens.core.isolation.pool import WorkerPool
from exportlens.core.model.request import ExportRequest, Limits
from exportlens.core.serde.reader import read_program

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def test_targets_carry_their_program() -> None:
    requests = [
        ExportRequest(id=i, path=str(EXAMPLES / name), root=str(EXAMPLES), limits=Limits(timeout_s=60))
        for i, name in enumerate(["counter.py", "multi_targets.py", "data_dependent.py"])
    ]
    with WorkerPool(2) as pool:
        results = {Path(r.path).name: r for r in pool.run(requests)}
    ok = [t for r in results.values() for t in r.targets if t.status == "ok"]
    assert len(ok) >= 3
    for t in ok:
        assert t.signature is not None
        program = read_program(t.program)
        assert program.signature.torch_text() == t.signature.torch_text()
        assert any(n.source is not None for n in program.nodes)
    counter = results["counter.py"].targets[0]
    codes = {d.code for d in read_program(counter.program).diagnostics}
    assert "mutation/buffer" in codes  # the target's diagnostics travel with its program
    failed = [t for t in results["data_dependent.py"].targets if t.status == "error"]
    assert failed and all(t.program == b"" for t in failed)
