"""tests/corpus/shapes: several targets in one file, each with its own
``dynamic_shapes`` mistake, the models in their own module. Each diagnostic is at
its own target's ``Dim`` (not the first target's that declares the same name),
names the line of the model that specialised it, and a malformed
``dynamic_shapes`` is reported at its declaration, not the ``def`` line."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import ROOT, check_json

CORPUS = ROOT / "tests" / "corpus" / "shapes"
PKG = CORPUS / "shapes"


def _lines_of(path: Path, text: str) -> list[int]:
    return [i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line]


def test_each_target_has_its_own_dim_and_specialising_line_and_its_declaration() -> None:
    code, doc = check_json(str(PKG / "targets.py"), cwd=CORPUS)
    assert code == 1
    [entry] = doc["files"]
    by_target = {d["target"]: d for d in entry["diagnostics"]}
    assert sorted(by_target) == ["pair_sum", "pooled", "positional"]
    targets, layers = PKG / "targets.py", PKG / "layers.py"
    first_seq, second_seq = _lines_of(targets, 'Dim("seq"')
    for name, dim_line, culprit in (("positional", first_seq, "return x + self.pos"), ("pooled", second_seq, "reshape(2, 8 * 4)")):
        d = by_target[name]
        assert (d["code"], d["line"]) == ("constraint-violation", dim_line), name
        [note] = [r for r in d["related"] if "specialises" in r["message"]]
        assert (CORPUS / note["path"]).resolve() == layers.resolve()  # written as path is: relative to where check ran
        assert note["line"] == _lines_of(layers, culprit)[0]
    malformed = by_target["pair_sum"]
    assert malformed["line"] == _lines_of(targets, "dynamic_shapes={\"pair\"")[0]
    assert "`dynamic_shapes`" in malformed["message"]
