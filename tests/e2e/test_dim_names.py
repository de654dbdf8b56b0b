"""The user's ``Dim`` names in what the command prints (issue 12): ``show``'s table
names dims after the declared ``Dim`` with torch's symbols in a legend; the JSON
document keeps torch's symbols in shapes and ranges (a contract: tools match them
against torch's own output) and maps them to the names in ``dim_names``."""

from __future__ import annotations

from tests.conftest import EXAMPLES, check_json, run_cli


def test_show_names_dims_and_json_keeps_torchs_symbols() -> None:
    path = str(EXAMPLES / "dynamic_ok.py")
    code, doc = check_json(path)
    assert code == 0
    [target] = doc["files"][0]["targets"]
    sig = target["signature"]
    [x] = [s for s in sig["inputs"] if s["kind"] == "USER_INPUT"]
    batch, seq, width = x["shape"]
    assert width == 16 and sig["dim_names"] == {batch: "batch", seq: "seq"}
    assert batch not in ("batch", "seq") and set(sig["ranges"]) == {batch, seq}  # torch's symbols
    assert sig["ranges"][seq] == [2, 512]

    proc = run_cli("show", path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "x                           float32[batch, seq, 16] cpu" in out
    assert f"ranges: batch in [{sig['ranges'][batch][0]}, 32], seq in [2, 512]" in out
    assert f"dims: batch is torch's {batch}, seq is torch's {seq}" in out
    assert f"[{batch}," not in out
