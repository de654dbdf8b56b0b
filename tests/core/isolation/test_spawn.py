"""Jobs started without fork (``spawning``), with real workers and real model files:
each job a fresh interpreter started ahead of its request, isolated from the next;
and the CUDA case, through the stand-in for torch's fork check: a file whose forked
job torch refused CUDA runs again, spawned, and gets torch's own answer."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from exportlens.core.isolation.jobprocess import BAD_FORK_STAND_IN
from exportlens.core.isolation.pool import WorkerPool
from exportlens.core.isolation.startmethod import StartMethod
from exportlens.core.model.request import Limits
from tests.core.isolation.models import add_model, request_for
from tests.core.isolation.test_preload import Site, export, project, wait_for, width_of
from tests.core.isolation.test_standby import _idle_standby

SPAWN = StartMethod("spawn", "test")
FORK = StartMethod("fork", "test")
ROOMY = Limits(timeout_s=600, memory_mb=8192)

# Says which process runs it and what an earlier job left in torch's module.
WHO = add_model(
    '''import os
import torch

print("cmdline:", open("/proc/self/cmdline", "rb").read().replace(b"\\0", b" ").decode())
print("left by an earlier job:", getattr(torch, "_exportlens_left", None))
with open(os.environ["PID_FILE"], "a") as f:
    f.write(f"{os.getpid()}\\n")
torch._exportlens_left = "{name}"'''
)

ON_CUDA = """import torch


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x)


model = MLP().to("cuda:0")
example_args = (torch.ones(2, 4),)
"""


def test_spawned_jobs_are_fresh_interpreters_started_ahead(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pid_file = tmp_path / "pids"
    monkeypatch.setenv("PID_FILE", str(pid_file))
    files = []
    for name in ("first", "second"):
        files.append(tmp_path / f"{name}.py")
        files[-1].write_text(WHO.replace("{name}", name))
    with WorkerPool(1, start_method=SPAWN) as pool:
        assert pool.start_method.method == "spawn"
        pool.wait_ready()
        (zygote,) = pool.worker_pids()
        standby = _idle_standby(zygote)  # started ahead, warm, waiting for a request
        results = []
        for i, path in enumerate(files):
            (result,) = pool.run([request_for(path, i, ROOMY)])
            results.append(result)
    for result in results:
        assert [t.status for t in result.targets] == ["ok"], result.diagnostics
        assert "exportlens.core.isolation.spawning" in result.output_tail  # not a fork of the zygote
        assert "left by an earlier job: None" in result.output_tail  # the first job's change died with it
    pids = [int(p) for p in pid_file.read_text().split()]
    assert pids[0] == standby and len(set(pids)) == 2


def test_a_spawned_job_that_hangs_is_stopped_at_its_limit(tmp_path: Path) -> None:
    """The job's time starts once its interpreter is warm: a limit shorter than
    importing torch still lets a healthy file finish, and stops a hanging one."""
    ok, hangs = tmp_path / "ok.py", tmp_path / "hangs.py"
    ok.write_text(WHO.replace("{name}", "ok").replace('os.environ["PID_FILE"]', "os.devnull"))
    hangs.write_text("import time\nimport torch\n\ntime.sleep(600)\n")
    with WorkerPool(1, start_method=SPAWN) as pool:
        limits = Limits(timeout_s=8, memory_mb=8192)
        started = time.monotonic()
        results = {r.path: r for r in pool.run([request_for(p, i, limits) for i, p in enumerate((ok, hangs))])}
    assert [t.status for t in results[str(ok)].targets] == ["ok"], results[str(ok)].diagnostics
    assert [d.code for d in results[str(hangs)].diagnostics] == ["timeout"]
    assert results[str(hangs)].diagnostics[0].line == 4  # the stack dumped before the kill
    assert time.monotonic() - started < 300


def _fresh_process_error(code: str) -> str:
    """The last line of what a fresh interpreter prints running ``code``: its error."""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0, proc.stdout
    return proc.stderr.strip().splitlines()[-1]


def test_a_fork_torch_refuses_cuda_is_run_again_spawned_and_remembered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the stand-in, a forked job is what a CUDA build's fork is after the
    worker's torch touched CUDA: torch's own ``_is_in_bad_fork()`` says so, and torch
    raises "Cannot re-initialize CUDA in forked subprocess". The user must see what a
    fresh process gets instead: on a CPU build, torch's "not compiled with CUDA"; on a
    CUDA build without a GPU (PyPI's, as scripts/compat-python installs for 3.12 and
    3.13 here), torch's "Found no NVIDIA driver"."""
    fresh = _fresh_process_error(ON_CUDA)
    assert "forked subprocess" not in fresh
    monkeypatch.setenv(BAD_FORK_STAND_IN, "1")
    model = tmp_path / "on_cuda.py"
    model.write_text(ON_CUDA)
    plain = tmp_path / "plain.py"
    plain.write_text(WHO.replace("{name}", "plain").replace('os.environ["PID_FILE"]', "os.devnull"))
    log = tmp_path / "worker.log"
    with WorkerPool(1, start_method=FORK, log_path=log) as pool:
        results = [list(pool.run([request_for(p, i, ROOMY)])) for i, p in enumerate((model, model, plain))]
    cuda_first, cuda_again, (other,) = results[0], results[1], results[2]
    for (result,) in (cuda_first, cuda_again):
        (diagnostic,) = result.diagnostics
        assert diagnostic.code == "import-error" and diagnostic.line == 13
        assert fresh.split(": ", 1)[1] in diagnostic.message, fresh
        assert "forked subprocess" not in diagnostic.message
    said = log.read_text()
    assert said.count("CUDA cannot be used in a forked process; its jobs are spawned from now on") == 1  # remembered
    assert str(model) in said
    # Only that file: another one still runs in a fork of the zygote.
    assert [t.status for t in other.targets] == ["ok"] and "exportlens.core.isolation.spawning" not in other.output_tail
    assert "zygote" in other.output_tail


@pytest.mark.needs_speedup("preloading")
def test_a_spawned_standby_imports_what_the_worker_preloaded_before_its_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Preloading where it applies: the worker still learns which libraries jobs
    import and imports them while idle (under the same refusal rule); a spawned job
    process imports them while it warms up, before the save that needs them."""
    site = Site(tmp_path, monkeypatch)
    trace = tmp_path / "trace"
    monkeypatch.setenv("EXPORTLENS_TRACE", str(trace))  # the workers inherit it
    site.library("slowlib")
    model = project(tmp_path / "a", ["slowlib"], width="slowlib.WIDTH")
    with WorkerPool(1, preload_dir=tmp_path / "cache", start_method=SPAWN) as pool:
        pool.wait_ready()
        (worker,) = pool.worker_pids()
        assert width_of(export(pool, model, 1)) == 3
        [first_job] = site.importers("slowlib")
        wait_for(lambda: worker in site.importers("slowlib"), "the idle worker imported slowlib")
        # The standby started after that imports it with no request yet.
        wait_for(lambda: len(site.importers("slowlib")) >= 3, "a standby imported slowlib while it warmed up")
        standby = site.importers("slowlib")[-1]
        assert standby not in (first_job, worker)
        assert width_of(export(pool, model, 2)) == 3
    # That standby ran the request, and imported slowlib once: before it.
    assert f"zygote: spawned standby {standby} takes request 2" in trace.read_text()
    assert site.importers("slowlib").count(standby) == 1
