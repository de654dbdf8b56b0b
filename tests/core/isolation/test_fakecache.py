"""The fake-tensor dispatch cache of later jobs, filled by the worker itself
(``core/isolation/speedups/fakecache.py``): a fork that asked another fork's questions again
exports the same program computing few entries itself; a job that changed the
fake-tensor rules computes everything itself, as a fresh torch would; bytes that are
not questions build and run nothing; and through a real worker, the first save of a
model sends its questions and a later one finds the answers."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import msgpack
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from exportlens.core import trace
from exportlens.core.isolation.pool import WorkerPool
from exportlens.core.isolation.speedups import fakecache
from exportlens.core.isolation.startmethod import StartMethod
from exportlens.core.isolation.warmup import warm_up
from exportlens.core.model.request import ExportRequest, Limits
from tests.core.isolation.forks import in_child

pytestmark = pytest.mark.needs_speedup("fake-tensor answers")  # what it checks is that speed-up's (tests/conftest.py)


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(12, 20)
        self.norm = torch.nn.LayerNorm(20)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.norm(self.fc(x)).transpose(0, 1), dim=-1)


class MatMul(torch.nn.Module):
    def forward(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return x @ w


@pytest.fixture(scope="module", autouse=True)
def zygote_like() -> None:
    """This process as the zygote is: warmed up, the recording hook installed."""
    warm_up()
    fakecache.install()


def _export() -> str:
    torch.manual_seed(0)
    return str(torch.export.export(Block(), (torch.randn(3, 12),)).run_decompositions({}).graph_module.code)


def _asked() -> tuple[bytes, int]:
    """In a fork, as a job: the questions of one export, and how many entries it computed."""

    def work() -> tuple[bytes, int]:
        fakecache.record()
        misses = FakeTensorMode.cache_misses
        _export()
        return fakecache.questions(), FakeTensorMode.cache_misses - misses

    data, computed = in_child(work)
    assert data and computed > 10
    return data, computed


def _answered_then_exported(data: bytes) -> tuple[int, int, str]:
    """In a fork, as the zygote then a job: answer ``data``; then export (entries the
    answers added, entries the export still computed, its code)."""

    def work() -> tuple[int, int, str]:
        answers = fakecache.Answers()
        answers.learn(data)
        added = answers.answer(lambda: False)
        fakecache.settle()
        fakecache.record()
        misses = FakeTensorMode.cache_misses
        code = _export()
        return added, FakeTensorMode.cache_misses - misses, code

    return in_child(work)


def test_a_fork_that_answered_another_forks_questions_computes_few_entries_again() -> None:
    data, computed = _asked()
    added, misses, code = _answered_then_exported(data)
    assert added >= computed // 2
    assert misses <= computed // 4  # views and in-place ops, cheap, are left to the job
    _, cold_misses, cold_code = _answered_then_exported(b"")
    assert cold_misses == computed  # without them, each is computed again
    assert code == cold_code  # and the program is the same


def _new_entries(start: int) -> dict[str, str]:
    return {repr(key.key): repr(entry) for key, entry in list(FakeTensorMode.cache.items())[start:]}


def test_the_zygotes_answers_are_the_entries_the_job_computed() -> None:
    """Each entry the zygote adds for a question is the one tracing itself made for
    that key (output metadata, aliasing, requires_grad): nothing a later job reads
    differs from what it would have computed."""

    def job() -> tuple[bytes, dict[str, str]]:
        start = len(FakeTensorMode.cache)
        fakecache.record()
        _export()
        return fakecache.questions(), _new_entries(start)

    data, computed = in_child(job)

    def zygote() -> dict[str, str]:
        start = len(FakeTensorMode.cache)
        answers = fakecache.Answers()
        answers.learn(data)
        answers.answer(lambda: False)
        return _new_entries(start)

    answered = in_child(zygote)
    common = computed.keys() & answered.keys()
    assert len(common) >= len(computed) // 2
    assert {k: answered[k] for k in common} == {k: computed[k] for k in common}


def test_questions_are_plain_data() -> None:
    data, _ = _asked()
    questions = msgpack.unpackb(data)
    assert all(q[0] in ("aten", "prims") and isinstance(q[1], str) for q in questions)
    assert any(q[1] == "addmm" or q[1] == "linear" for q in questions)


def _wider_mm() -> None:
    """As a model file that changes torch's fake-tensor rules in its own job would:
    ``mm`` gets one extra column."""
    from torch._subclasses import fake_impls

    def wider(fake_mode: FakeTensorMode, func: object, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        meta = torch.empty(a.shape[0], b.shape[1] + 1, device="meta")
        return fake_mode.fake_tensor_converter.from_meta_and_device(fake_mode, meta, a.device)

    fake_impls.op_implementations_checks.insert(0, (lambda func: func is torch.ops.aten.mm.default, wider))


def _matmul_shape() -> list[int]:
    """The output shape of ``MatMul``'s export of ``[5, 7] @ [7, 3]``, here."""
    ep = torch.export.export(MatMul(), (torch.ones(5, 7), torch.ones(7, 3)))
    [out] = [n for n in ep.graph.nodes if n.op == "output"][0].args[0]
    return list(out.meta["val"].shape)


def _mm_shape(change_rules: bool) -> list[int]:
    """In a fork that already holds the answer for ``[5, 7] @ [7, 3]``: the output
    shape of the export, after the rules were changed or not."""

    def learn() -> bytes:
        fakecache.record()
        _matmul_shape()
        return fakecache.questions()

    data = in_child(learn)

    def work() -> list[int]:
        answers = fakecache.Answers()
        answers.learn(data)
        assert answers.answer(lambda: False) > 0
        fakecache.settle()
        fakecache.record()
        if change_rules:
            _wider_mm()
        return _matmul_shape()

    return in_child(work)


def test_a_job_that_changed_the_rules_computes_everything_itself() -> None:
    assert _mm_shape(change_rules=False) == [5, 3]
    assert _mm_shape(change_rules=True) == [5, 4]  # as torch, in a fresh process of that file


def test_what_a_job_computed_under_its_own_rules_never_reaches_the_worker() -> None:
    """The job's questions are asked again in the worker's own state: torch's answer."""

    def learn() -> bytes:
        fakecache.record()
        _wider_mm()
        _matmul_shape()
        return fakecache.questions()

    data = in_child(learn)

    def work() -> list[int]:
        answers = fakecache.Answers()
        answers.learn(data)
        answers.answer(lambda: False)
        return _matmul_shape()

    assert in_child(work) == [5, 3]


class _Evil:
    def __reduce__(self) -> tuple[object, ...]:
        return (os.system, ("touch pwned",))


@pytest.mark.parametrize(
    "data",
    [
        b"not msgpack at all",
        pickle.dumps(({}, [((torch.float32,), _Evil())])),  # the old format, with a payload
        msgpack.packb([["os", "system", "default", ["float32", "cpu", False, None], ["u", [["s", "touch pwned"]]], ["k", []]]]),
        msgpack.packb([["aten", "_print", "default", ["float32", "cpu", False, None], ["u", [["s", "pwned"]]], ["k", []]]]),
        msgpack.packb([["aten", "mm", "default", ["float32", "cpu", False, None], ["u", [["t", "float32", [2, 2], [2, 1], 0, 16, "cpu", False, False], ["x", "?"]]], ["k", []]]]),
        msgpack.packb([["aten", "mm", "default", ["float32", "cpu", False, {"__class__": 1}], ["u", []], ["k", []]]]),
        msgpack.packb([["aten", "add", "Tensor", ["float32", "cpu", False, None], ["u", [["t", "float32", [1 << 40], [1], 0, 4, "cpu", False, False]] * 2], ["k", []]]]),
        msgpack.packb([1, 2, 3]),
        msgpack.packb({"a": 1}),
    ],
)
def test_bytes_that_are_not_questions_build_and_run_nothing(data: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)

    def work() -> int:
        answers = fakecache.Answers()
        answers.learn(data)
        return answers.answer(lambda: False)

    assert in_child(work) == 0
    assert not (tmp_path / "pwned").exists()
    assert "pwned" not in capfd.readouterr().out


MODEL = """
import torch


class Mix(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(6, 10)

    def forward(self, x):
        return torch.nn.functional.gelu(self.fc(x)).cumsum(-1)


model = Mix()
example_args = (torch.randn(5, 6),)
"""


def test_through_a_worker_the_first_save_sends_its_entries_and_the_next_has_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "trace"
    monkeypatch.setenv("EXPORTLENS_TRACE", str(log))  # the workers inherit it
    model = tmp_path / "model.py"
    model.write_text(MODEL)
    with WorkerPool(1, start_method=StartMethod("fork", "forks inherit the worker's answers")) as pool:
        pool.wait_ready()
        results = []
        for i in range(2):
            model.write_text(MODEL + f"\n_save = {i}\n")
            (result,) = pool.run([ExportRequest(id=i, path=str(model), root=str(tmp_path), limits=Limits(600))])
            results.append(result)
    assert [[t.status for t in r.targets] for r in results] == [["ok"], ["ok"]]
    assert results[0].targets[0].program == results[1].targets[0].program
    steps = [what for _, _, what in trace.read(str(log))]
    sent = [i for i, what in enumerate(steps) if what == "job: fake-tensor cache questions sent"]
    kept = [i for i, what in enumerate(steps) if what.startswith("zygote:") and what.endswith("fake-tensor cache entries kept")]
    # The first save asked; the zygote answered (before the second request, or after
    # it, while idle); the second save, forked after the answers, asked nothing new.
    assert len(sent) == 1 and kept and sent[0] < kept[0]
