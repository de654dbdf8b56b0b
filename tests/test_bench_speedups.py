"""``bench/bench_speedups.py``'s own logic, without running it: the rows the decision
records point to exist, every switch has a row, on and off take turns, and a switch
no code reads is noticed."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("bench_speedups", ROOT / "bench" / "bench_speedups.py")
assert _spec is not None and _spec.loader is not None
bench = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = bench  # its dataclass looks itself up there
_spec.loader.exec_module(bench)


def test_each_decision_record_names_a_row_of_the_bench() -> None:
    rows = {row.name for row in bench.ROWS}
    named = []
    for page in sorted((ROOT / "docs" / "decisions").glob("0*.md")):
        for match in re.finditer(r"bench_speedups\.py --only (\"[^\"]+\"|\S+)`", page.read_text()):
            named.append((page.name, match.group(1).strip('"')))
    assert len(named) >= 5, named
    assert [(page, name) for page, name in named if name not in rows] == []


def test_every_switch_is_turned_off_by_one_row_and_by_the_last() -> None:
    alone = [dict(row.off) for row in bench.ROWS if len(row.off) == 1]
    assert sorted(next(iter(off)) for off in alone) == sorted(bench.SWITCHES)
    assert all(value == "0" for off in alone for value in off.values())
    last = dict(bench.ROWS[-1].off)
    assert last == {bench.ALL_OFF: "off", **{switch: "0" for switch in bench.SWITCHES}}


def test_on_and_off_take_turns_and_neither_always_goes_first() -> None:
    firsts = [bench.order(r, k)[0] for r in range(2) for k in range(4)]
    assert firsts.count(True) == firsts.count(False)
    assert all(a != b for a, b in (bench.order(r, k) for r in range(2) for k in range(4)))
    assert bench.order(0, 0) != bench.order(1, 0)  # each round begins with the other one


def test_a_switch_no_file_reads_is_noticed(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text('STANDBY = os.environ.get("EXPORTLENS_STANDBY", "1")\n')
    assert bench.read_here("EXPORTLENS_STANDBY", tmp_path)
    assert not bench.read_here("EXPORTLENS_FRAME_STACK", tmp_path)


def test_only_a_library_model_with_preloading_on_waits_for_it() -> None:
    assert bench.expects_preload("bert.py", {})
    assert not bench.expects_preload("bert.py", {"EXPORTLENS_PRELOAD": "0"})
    assert not bench.expects_preload("bert.py", {bench.ALL_OFF: "off"})
    assert not bench.expects_preload("plain.py", {})


def test_the_ratio_is_off_over_on() -> None:
    assert bench.ratio([300.0, 200.0, 250.0], [100.0, 140.0, 125.0]) == 2.0


def test_paired_is_the_median_of_each_save_against_its_neighbour() -> None:
    # Pair by pair: 1.5, 0.75 and 3.0. The medians' ratio, 300/300, says 1.0.
    assert bench.paired([150.0, 300.0, 900.0], [100.0, 400.0, 300.0]) == 1.5
    assert bench.ratio([150.0, 300.0, 900.0], [100.0, 400.0, 300.0]) == 1.0
