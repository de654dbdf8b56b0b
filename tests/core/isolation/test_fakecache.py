"""The fake-tensor dispatch cache a job fills, carried to the zygote
(``core/isolation/fakecache.py``): a fork that merged another fork's entries exports
the same program without computing them again; an operator whose kernels differ
keeps its entries out; bytes that are not entries build nothing; and through a real
worker, the first save of a model sends its entries and a later one has them."""

from __future__ import annotations

import io
import os
import pickle
from pathlib import Path
from typing import Callable

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from exportlens.core.isolation import fakecache, trace
from exportlens.core.isolation.messages import ExportRequest, Limits
from exportlens.core.isolation.pool import WorkerPool
from tests.core.isolation.forks import in_child


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(12, 20)
        self.norm = torch.nn.LayerNorm(20)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.norm(self.fc(x)).transpose(0, 1), dim=-1)


def _export() -> str:
    torch.manual_seed(0)
    return str(torch.export.export(Block(), (torch.randn(3, 12),)).run_decompositions({}).graph_module.code)


def _collected() -> bytes:
    def work() -> bytes:
        start = fakecache.mark()
        _export()
        return fakecache.collect(start)

    data = in_child(work)
    assert data
    return data


def _export_counting(data: bytes, before_merge: Callable[[], None] = lambda: None) -> tuple[int, int, str, set[str]]:
    """In a fork: merge ``data``, export; (entries added, cache misses of the export,
    its code, the operators of the entries added)."""

    def work() -> tuple[int, int, str, set[str]]:
        before_merge()
        start = len(FakeTensorMode.cache)
        added = fakecache.merge(data)
        ops = {str(key.key[0]) for key in list(FakeTensorMode.cache)[start:]}
        misses = FakeTensorMode.cache_misses
        code = _export()
        return added, FakeTensorMode.cache_misses - misses, code, ops

    return in_child(work)


def test_a_fork_with_the_entries_of_another_computes_none_again() -> None:
    data = _collected()
    added, misses, code, _ = _export_counting(data)
    assert added > 10
    assert misses == 0
    cold_added, cold_misses, cold_code, _ = _export_counting(b"")
    assert cold_added == 0 and cold_misses > 10  # without them, each is computed again
    assert code == cold_code  # and the program is the same


def test_an_operator_whose_kernels_differ_keeps_its_entries_out() -> None:
    data = _collected()
    whole, _, _, ops = _export_counting(data)
    assert "aten._softmax.default" in ops

    def replace_softmax_meta() -> None:
        # As model code registering its own meta function for an operator would.
        from torch._decomp import meta_table

        op = torch.ops.aten._softmax.default
        theirs = meta_table[op]
        meta_table[op] = lambda *args, **kwargs: theirs(*args, **kwargs)

    added, misses, _, ops = _export_counting(data, replace_softmax_meta)
    assert 0 < added < whole
    assert "aten._softmax.default" not in ops
    assert misses >= 1


class _Evil:
    def __reduce__(self) -> tuple[object, ...]:
        return (os.system, ("touch pwned",))


@pytest.mark.parametrize(
    "data",
    [
        b"not a pickle",
        pickle.dumps(({}, [((torch.float32,), _Evil())])),
        pickle.dumps(({}, [((1, 2), None)])),
        pickle.dumps([1, 2, 3]),
    ],
)
def test_bytes_that_are_not_entries_build_nothing(data: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    added, _, _, _ = _export_counting(data)
    assert added == 0
    assert not (tmp_path / "pwned").exists()


def test_the_reader_refuses_what_is_not_a_cache_type() -> None:
    with pytest.raises(pickle.UnpicklingError):
        fakecache._Reader(io.BytesIO(pickle.dumps(os.system))).load()
    with pytest.raises(pickle.UnpicklingError):
        fakecache._Reader(io.BytesIO(pickle.dumps(torch.nn.Linear))).load()


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
    with WorkerPool(1) as pool:
        pool.wait_ready()
        results = []
        for i in range(2):
            model.write_text(MODEL + f"\n_save = {i}\n")
            (result,) = pool.run([ExportRequest(id=i, path=str(model), root=str(tmp_path), limits=Limits(600))])
            results.append(result)
    assert [[t.status for t in r.targets] for r in results] == [["ok"], ["ok"]]
    assert results[0].targets[0].program == results[1].targets[0].program
    steps = [what for _, _, what in trace.read(str(log))]
    sent = [i for i, what in enumerate(steps) if what == "job: fake-tensor cache entries sent"]
    kept = [i for i, what in enumerate(steps) if what.startswith("zygote:") and what.endswith("fake-tensor cache entries kept")]
    assert len(sent) == 1 and len(kept) == 1 and sent[0] < kept[0]
    second = next(i for i, what in enumerate(steps) if what == "zygote: request 1 read")
    assert kept[0] < second
