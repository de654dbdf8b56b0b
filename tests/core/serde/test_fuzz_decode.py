"""Fuzz of both decoders (``read_program`` and ``loads``) on mutations of real programs.

Four small real programs (static with weights, dynamic shapes, ``torch.cond``
subgraphs, keyword inputs with an unbacked size; see :mod:`models`) are mutated at the
byte and at the structure level (:mod:`mutate`, fixed seed) and decoded in child
processes (:mod:`decode_child`) under a 5 s CPU-time and a 1 GiB memory limit per
payload. What must hold for every payload: the only exception either decoder raises
is ``SchemaError``; nothing the bytes hold ever runs (hostile texts create a marker
file if they do; programs with one are also turned into a module and called); no
payload goes over a limit. A failure names the payload: ``mutated(bases, SEED, i,
marker)`` rebuilds it.
"""

from __future__ import annotations

import collections
from pathlib import Path

import pytest

from . import models
from .fuzzing import Corpus, Report, decode_in_children
from .mutate import mutated

pytestmark = pytest.mark.adversarial

SEED = 20240610
COUNT = 6000
BASES = ("static", "dynamic", "cond", "kwargs", "sparse")


def _figures(report: Report) -> str:
    outcomes = report.outcomes
    seen = collections.Counter(f"{step}: {o[step].split(':')[0]}" for o in outcomes for step in ("read", "loads") if o[step] != "ok")
    return (
        f"{len(outcomes)} payloads decoded by read_program and loads; "
        f"max CPU per payload {max(o['cpu'] for o in outcomes):.3f} s; "
        f"max peak RSS added {max(o['rss'] for o in outcomes) / 2**20:.1f} MiB; "
        f"loaded {sum(o['loads'] == 'ok' for o in outcomes)}, read {sum(o['read'] == 'ok' for o in outcomes)}; "
        f"exceptions {dict(sorted(seen.items()))}; killed {len(report.killed)}"
    )


def test_mutated_programs_decode_to_schema_errors_within_limits(tmp_path: Path) -> None:
    bases = [models.payload(n) for n in BASES]
    corpus = Corpus(bases=bases, inputs=[models.inputs(n) for n in BASES])
    report = decode_in_children(corpus, tmp_path, COUNT, seed=SEED, batch=1000)
    print(_figures(report))

    def culprit(i: int) -> str:
        base, data, what = mutated(bases, SEED, i, str(tmp_path / "markers" / f"M{i}"))
        return f"payload {i} (base {BASES[base]}, {what}, {len(data)} bytes)"

    assert not report.killed, "\n".join(f"{culprit(k['i'])} killed its decoder (returncode {k['returncode']}): {k['stderr'][-500:]}" for k in report.killed)
    assert len(report.outcomes) == COUNT
    bad = [o for o in report.outcomes if o["read"] not in ("ok", "SchemaError") or o["loads"] not in ("ok", "SchemaError")]
    assert not bad, "\n".join(f"{culprit(o['i'])}: read {o['read']}, loads {o['loads']}" for o in bad[:20])
    executed = [o for o in report.outcomes if o["executed"]] + [{"i": int(p.name[1:])} for p in (tmp_path / "markers").iterdir()]
    assert not executed, "code from the bytes ran: " + "; ".join(culprit(o["i"]) for o in executed)
    assert max(o["rss"] for o in report.outcomes) < 1 << 30
    # The mutations reach deep: some programs still load, some fail in each decoder.
    assert sum(o["loads"] == "ok" for o in report.outcomes) > COUNT // 20
    assert sum(o["read"] == "SchemaError" for o in report.outcomes) > COUNT // 20
    assert sum(o["what"].startswith("structure inject") for o in report.outcomes) > COUNT // 40
