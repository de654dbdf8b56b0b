"""Each speed-up of the worker is a plug-in its switch turns off, and the core exports
without any of them (``core/isolation/speedups``).

One real worker per setting runs the same saves: a model that imports a library of
its own (what preloading imports while idle), three times with a new layer width
(new fake-tensor calls to answer), each request sent once the worker has had its idle
moment. What each speed-up does leaves a mark in the trace (``EXPORTLENS_TRACE``), and
the worker's log says which are on and why."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from exportlens.core import trace
from exportlens.core.isolation.pool import WorkerPool
from exportlens.core.isolation.speedups import switches
from exportlens.core.isolation.startmethod import StartMethod
from tests.core.isolation.models import request_for

FORK = StartMethod("fork", "the test")

MODEL = """
import speedlib
import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear({width}, 3)

    def forward(self, x):
        return self.fc(x) + speedlib.OFFSET


model = Model()
example_args = (torch.randn(2, {width}),)
"""

# What each speed-up leaves in the trace when it works, and the row of the worker's log.
MARKS = {
    "standby job": "standby: warm, by",
    "hot pages": "hot pages in",
    "fake-tensor answers": "fake-tensor cache entries kept",
    "preloading": "zygote: preloading speedlib",
}
SWITCHES = {
    "EXPORTLENS_STANDBY": "standby job",
    "EXPORTLENS_HOT_PAGES": "hot pages",
    "EXPORTLENS_FAKE_CACHE": "fake-tensor answers",
    "EXPORTLENS_PRELOAD": "preloading",
    "EXPORTLENS_FRAME_STACK": "frame stack",
}
# A speed-up that needs another is off with it.
NEEDS = {"hot pages": "standby job"}


def _wait_for(log: Path, text: str, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if log.exists() and any(text in what for _, _, what in trace.read(str(log))):
            return True
        time.sleep(0.05)
    return False


def _warm_standby(log: Path) -> int | None:
    """The worker's standby now, if it is warm."""
    lines = trace.read(str(log)) if log.exists() else []
    standby = None
    for _, _, what in lines:
        if what.startswith("zygote: standby ") and what.endswith(" forked"):
            standby = int(what.split()[2])
        elif what.startswith("zygote: standby "):
            standby = None  # dropped, killed or taken
    if standby is not None and any(pid == standby and what.startswith("standby: warm, by") for _, pid, what in lines):
        return standby
    return None


def _standby_warm(log: Path, timeout: float) -> bool:
    """Wait until the worker's standby is warm, and still its standby a moment later
    (no idle work under way that drops it)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        standby = _warm_standby(log)
        if standby is not None:
            time.sleep(0.3)
            if _warm_standby(log) == standby:
                return True
        time.sleep(0.05)
    return False


def _saves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: dict[str, str], expect_on: set[str]) -> tuple[str, str]:
    """Three saves in one worker with ``env``; its trace and its log."""
    site = tmp_path / "site"
    (site / "speedlib").mkdir(parents=True)
    (site / "speedlib" / "__init__.py").write_text("OFFSET = 1.0\n")
    monkeypatch.setenv("PYTHONPATH", str(site))  # the workers inherit it, and ``env``
    for name in (*SWITCHES, switches.ALL):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    traced, log = tmp_path / "trace", tmp_path / "worker.log"
    monkeypatch.setenv("EXPORTLENS_TRACE", str(traced))
    model = tmp_path / "project" / "model.py"  # its folder the project's root: the library lies outside it
    model.parent.mkdir()
    with WorkerPool(1, start_method=FORK, log_path=log, preload_dir=tmp_path / "preload") as pool:
        pool.wait_ready()
        for i, width in enumerate((5, 6, 7)):
            if "standby job" in expect_on:  # a standby warm before the request: it records the hot pages
                assert _standby_warm(traced, 120), "no standby warmed up"
            model.write_text(MODEL.format(width=width))
            (result,) = pool.run([request_for(model, i)])
            assert [t.status for t in result.targets] == ["ok"], result.diagnostics
            assert _wait_for(traced, f"zygote: request {i} job let go after its result", 60)
            if "preloading" in expect_on and i == 0:
                assert _wait_for(traced, MARKS["preloading"], 60), "the worker never preloaded what the job imported"
            elif i == 0:
                time.sleep(1.0)  # its idle moment, in which it would have preloaded
    return "\n".join(what for _, _, what in trace.read(str(traced))), log.read_text(encoding="utf-8", errors="replace")


def _log_rows(log: str) -> dict[str, str]:
    rows = {}
    for line in log.splitlines():
        if line.startswith("exportlens worker: speed-up "):
            rest = line.removeprefix("exportlens worker: speed-up ")
            for name in SWITCHES.values():
                if rest.startswith(name + " "):
                    rows[name] = rest.removeprefix(name + " ")
    return rows


def test_every_speed_up_is_on_by_default_here_and_leaves_its_mark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The contrast the switches are tested against: on this machine (Linux, CPython
    3.11) each one is on and does its work."""
    on = set(MARKS)
    marks, log = _saves(tmp_path, monkeypatch, {}, on)
    rows = _log_rows(log)
    assert set(rows) == set(SWITCHES.values()), log
    for name in MARKS:
        assert rows[name].startswith("on"), rows[name]
        assert MARKS[name] in marks, f"{name} left no mark"


@pytest.mark.parametrize("variable", sorted(SWITCHES))
def test_a_switch_turns_its_speed_up_off_and_the_others_stay_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str) -> None:
    name = SWITCHES[variable]
    off = {name} | {other for other, needed in NEEDS.items() if needed == name}
    marks, log = _saves(tmp_path, monkeypatch, {variable: "0"}, set(MARKS) - off)
    rows = _log_rows(log)
    assert rows[name] == f"off: ${variable}=0"
    for other in set(MARKS) - off:
        assert rows[other].startswith("on"), rows[other]
        assert MARKS[other] in marks, f"{other} left no mark with only {name} off"
    for gone in off & set(MARKS):
        assert MARKS[gone] not in marks, f"{gone} still worked with ${variable}=0"


def test_with_every_speed_up_off_the_core_alone_exports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marks, log = _saves(tmp_path, monkeypatch, {switches.ALL: "off"}, set())
    rows = _log_rows(log)
    assert rows == {name: f"off: ${switches.ALL}=off" for name in SWITCHES.values()}
    for name, mark in MARKS.items():
        assert mark not in marks, f"{name} worked with ${switches.ALL}=off"
    assert "fresh fork for request 2" in marks  # each job forked for its request


@pytest.mark.parametrize(("env", "roomy"), [({}, True), ({"EXPORTLENS_FRAME_STACK": "0"}, False), ({switches.ALL: "off"}, False)])
def test_the_frame_stack_switch_decides_whether_calls_get_a_chunk_of_their_own(env: dict[str, str], roomy: bool) -> None:
    """Under ``framestack.call`` the function's caller is the roomy frame where the
    speed-up is on here (CPython 3.11 thrashes), the caller's own frame where off."""
    code = (
        "import sys\n"
        "from exportlens.core.isolation.speedups import framestack\n"
        "print(framestack.call(lambda: sys._getframe(1).f_code.co_name))\n"
    )
    clean = {k: v for k, v in os.environ.items() if k not in (*SWITCHES, switches.ALL)}
    out = subprocess.run([sys.executable, "-c", code], env={**clean, **env}, capture_output=True, text=True, check=True).stdout.strip()
    assert (out == "_plain") is roomy, out  # ``_roomy`` runs ``_plain``'s code under another name's frame


def test_switched_off_reads_each_variable_and_the_one_for_all() -> None:
    assert switches.switched_off("EXPORTLENS_STANDBY", {}) is None
    assert switches.switched_off("EXPORTLENS_STANDBY", {"EXPORTLENS_STANDBY": "1"}) is None
    assert switches.switched_off("EXPORTLENS_STANDBY", {"EXPORTLENS_STANDBY": "0"}) == "off: $EXPORTLENS_STANDBY=0"
    assert switches.switched_off("EXPORTLENS_STANDBY", {"EXPORTLENS_PRELOAD": "0"}) is None
    assert switches.switched_off("EXPORTLENS_STANDBY", {switches.ALL: "off"}) == f"off: ${switches.ALL}=off"
    assert switches.switched_off("EXPORTLENS_STANDBY", {switches.ALL: "on"}) is None
