"""``check --shard K/N`` and ``exportlens merge`` through the real command (issue 30).

A project of small models whose report has a bit of everything (an error, a warning,
information, a signature change against the snapshot on a line with non-ASCII
characters, a syntax error, a snapshot entry whose file is gone) is checked as three
shards with one cache, and once whole with another: the merged report is the single
run's in every format, with its exit status. ``merge`` refuses sets that are not one
run. Recorded durations steer the balance.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

from exportlens.shard import EPSILON, assign, file_keys, weights
from tests.conftest import run_cli
from tests.e2e.test_ci_formats import validate

FORMATS = ("text", "json", "sarif", "github")

MODELS = {
    "models/mlp.py": """\
        import torch
        from torch import nn


        class TinyMLP(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.fc = nn.Linear(8, 4)

            def forward(self, x):
                return torch.relu(self.fc(x))


        model = TinyMLP()
        example_args = (torch.randn(2, 8),)
        """,
    "models/counter.py": """\
        import torch
        from torch import nn


        class Counter(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.register_buffer("steps", torch.zeros(1))

            def forward(self, x):
                self.steps.add_(1)
                return x + 1


        model = Counter()
        example_args = (torch.randn(3),)
        """,
    "models/inplace.py": """\
        import torch
        from torch import nn


        class Scale(nn.Module):
            def forward(self, x):
                x.mul_(2)
                return x


        model = Scale()
        example_args = (torch.randn(3),)
        """,
    "models/broken.py": """\
        import torch
        from torch import nn


        class Broken(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.fc = nn.Linear(8, 4)

            def forward(self, x):
                return self.fc(x)


        model = Broken()
        example_args = (torch.randn(2, 5),)
        """,
    "models/head.py": """\
        import torch
        from torch import nn


        class Head(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.fc = nn.Linear(8, 4)

            def forward(self, x):
                return self.fc(x) if "« »" else x  # the output


        model = Head()
        example_args = (torch.randn(2, 8),)
        """,
    "models/gone.py": """\
        import torch
        from torch import nn


        class Gone(nn.Module):
            def forward(self, x):
                return x * 2


        model = Gone()
        example_args = (torch.randn(2),)
        """,
    "models/syntax.py": """\
        example_args = (
        """,
}


def write_project(project: Path) -> None:
    (project / "pyproject.toml").write_text("[tool.exportlens]\ntimeout = 60\n")
    for name, text in MODELS.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(textwrap.dedent(text))


def env(cache: Path) -> dict[str, str | None]:
    return {"EXPORTLENS_CACHE_DIR": str(cache)}


def shard_run(project: Path, k: int, n: int, cache: Path, *extra: str, fmt: str = "json") -> tuple[int, str]:
    proc = run_cli("check", "--format", fmt, "--shard", f"{k}/{n}", "--jobs", "2", *extra, cwd=project, env=env(cache))
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, proc.stdout


def merged(project: Path, *reports: str, fmt: str = "json") -> Any:
    return run_cli("merge", "--format", fmt, *reports, cwd=project)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project with its snapshot, then a breaking edit of head.py and gone.py deleted;
    shards 1..3 of it as shard-K.json (cache ``shards``) and the whole run in every
    format as single.FORMAT (cache ``single``)."""
    root = tmp_path_factory.mktemp("shard")
    project = root / "project"
    project.mkdir()
    write_project(project)
    shards, single = root / "cache-shards", root / "cache-single"
    proc = run_cli("snapshot", cwd=project, env=env(shards))
    assert proc.returncode == 1, proc.stderr  # broken.py and syntax.py have errors; the others are recorded
    assert set(json.loads((project / "exportlens.snapshot.json").read_text())["files"]) >= {"models/head.py", "models/gone.py"}
    head = project / "models/head.py"
    head.write_text(head.read_text().replace("nn.Linear(8, 4)", "nn.Linear(8, 6)"))
    (project / "models/gone.py").unlink()
    for k in (1, 2, 3):
        status, out = shard_run(project, k, 3, shards)
        (project / f"shard-{k}.json").write_text(out)
        (project / f"shard-{k}.status").write_text(str(status))
    for fmt in FORMATS:
        proc = run_cli("check", "--format", fmt, "--jobs", "2", cwd=project, env=env(single))
        assert proc.returncode == 1, proc.stderr
        (project / f"single.{fmt}").write_text(proc.stdout)
    return project


def masked(text: str) -> str:
    """What differs between two runs of the same check: times, and whether a file's
    result was exported or came from the cache (each run has its own)."""
    text = re.sub(r'"(export|lower)_ms": [0-9.]+', r'"\1_ms": 0', text)
    text = re.sub(r'"from": "(run|cache|store)"', '"from": "?"', text)
    text = re.sub(r"exported in \d+ ms", "exported in N ms", text)
    return re.sub(r"^(Checked .*) in [0-9.]+ s.*$", r"\1", text, flags=re.M)


def test_every_file_is_in_exactly_one_shard(project: Path) -> None:
    reports = [json.loads((project / f"shard-{k}.json").read_text()) for k in (1, 2, 3)]
    shards = [r["shard"] for r in reports]
    everything = {"models/mlp.py", "models/counter.py", "models/inplace.py", "models/broken.py", "models/head.py", "models/syntax.py"}
    assert set(shards[0]["assignment"]) == everything
    assert all(s["assignment"] == shards[0]["assignment"] for s in shards)
    assert sorted(f for s in shards for f in s["files"]) == sorted(everything)
    for k, (s, report) in enumerate(zip(shards, reports, strict=True), start=1):
        assert (s["index"], s["count"]) == (k, 3)
        assert {f["path"] for f in report["files"]} - {"models/gone.py"} == set(s["files"])
    # The removed target of the deleted file is reported once, by shard 1.
    assert [k for k, r in enumerate(reports, start=1) if any(f["path"] == "models/gone.py" for f in r["files"])] == [1]
    assert len({s["settings"] for s in shards}) == len({s["sources"] for s in shards}) == 1


@pytest.mark.parametrize("fmt", FORMATS)
def test_three_shards_merge_into_the_single_run(project: Path, fmt: str) -> None:
    proc = merged(project, "shard-3.json", "shard-1.json", "shard-2.json", fmt=fmt)
    assert proc.returncode == 1, proc.stderr  # the single run's status: there are errors
    assert masked(proc.stdout) == masked((project / f"single.{fmt}").read_text())
    if fmt == "sarif":
        validate(json.loads(proc.stdout))
    if fmt == "text":
        assert "signature-changed" in proc.stdout and "no longer declared" in proc.stdout


def test_each_shard_reports_its_own_files_in_every_format(project: Path) -> None:
    """From the shards' cache (no export): each format holds the diagnostics of the
    shard's files, and together the shards hold the single run's."""
    single = json.loads((project / "single.sarif").read_text())["runs"][0]["results"]
    cache = project.parent / "cache-shards"
    sarif_results: list[Any] = []
    annotations: list[str] = []
    for k in (1, 2, 3):
        files = set(json.loads((project / f"shard-{k}.json").read_text())["shard"]["files"]) | ({"models/gone.py"} if k == 1 else set())
        status, out = shard_run(project, k, 3, cache, fmt="sarif")
        log = json.loads(out)
        validate(log)
        assert log["runs"][0]["automationDetails"] == {"id": f"exportlens/shard-{k}-of-3/"}
        results = log["runs"][0]["results"]
        assert {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in results} <= files
        assert status == (1 if any(r["level"] == "error" for r in results) else 0)
        sarif_results += results
        _, github = shard_run(project, k, 3, cache, fmt="github")
        *lines, summary = github.splitlines()
        assert f"[shard {k}/3: " in summary
        annotations += lines
        _, text = shard_run(project, k, 3, cache, "--output-format", "concise", fmt="text")
        assert {line.split(":")[0] for line in text.splitlines() if re.match(r"^models/\w+\.py:\d+:\d+: ", line)} <= files
    assert sorted(map(json.dumps, sarif_results)) == sorted(map(json.dumps, single))
    assert sorted(annotations) == sorted((project / "single.github").read_text().splitlines()[:-1])


def test_merge_refuses_sets_that_are_not_one_run(project: Path, tmp_path: Path) -> None:
    proc = merged(project, "shard-1.json", "shard-2.json")
    assert proc.returncode == 3 and "shard 3/3 missing" in proc.stderr, proc.stderr
    proc = merged(project, "shard-1.json", "shard-2.json", "shard-2.json", "shard-3.json")
    assert proc.returncode == 3 and "both shard 2/3" in proc.stderr, proc.stderr
    # Not a shard's report, and not a report at all: usage errors.
    proc = merged(project, "single.json")
    assert proc.returncode == 2 and "not the report of a shard" in proc.stderr, proc.stderr
    proc = merged(project, "single.sarif", "shard-1.json")
    assert proc.returncode == 2, proc.stderr
    # Shard 2 of 2 is not shard 2 of 3.
    cache = project.parent / "cache-shards"
    (project / "half.json").write_text(shard_run(project, 2, 2, cache)[1])
    proc = merged(project, "shard-1.json", "half.json", "shard-3.json")
    assert proc.returncode == 3 and "different runs" in proc.stderr, proc.stderr
    # Other settings: a timeout of 50 s, not the project's 60.
    (project / "other.json").write_text(shard_run(project, 3, 3, cache, "--timeout", "50")[1])
    proc = merged(project, "shard-1.json", "shard-2.json", "other.json")
    assert proc.returncode == 3 and "different settings" in proc.stderr, proc.stderr
    # Another assignment: shard 2 balanced by durations the others did not have.
    durations = tmp_path / "durations.json"
    durations.write_text(json.dumps({"models/mlp.py": 500, "models/counter.py": 400}))
    (project / "moved.json").write_text(shard_run(project, 2, 3, cache, "--durations", str(durations))[1])
    proc = merged(project, "shard-1.json", "moved.json", "shard-3.json")
    assert proc.returncode == 3 and "assigned the files to shards differently" in proc.stderr and "--durations" in proc.stderr, proc.stderr
    # Other sources: a file edited between the shards.
    copy = tmp_path / "edited"
    shutil.copytree(project, copy)
    (copy / "models/mlp.py").write_text((copy / "models/mlp.py").read_text() + "# edited\n")
    (copy / "edited.json").write_text(shard_run(copy, 3, 3, cache)[1])
    proc = merged(copy, "shard-1.json", "shard-2.json", "edited.json")
    assert proc.returncode == 3 and "different model files" in proc.stderr, proc.stderr
    # Another commit: the same files, in a git repository.
    git = tmp_path / "git"
    shutil.copytree(project, git)
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "models"]):
        subprocess.run(["git", *args], cwd=git, check=True, capture_output=True)
    (git / "committed.json").write_text(shard_run(git, 3, 3, cache)[1])
    proc = merged(git, "shard-1.json", "shard-2.json", "committed.json")
    assert proc.returncode == 3 and "was made at commit" in proc.stderr, proc.stderr


def test_the_assignment_does_not_depend_on_the_checkout(project: Path, tmp_path: Path) -> None:
    """Another checkout at another path, run from a subfolder with the files given in
    another order: the same assignment (project-relative names, no machine in it)."""
    copy = tmp_path / "elsewhere" / "checkout"
    shutil.copytree(project, copy)
    cache = project.parent / "cache-shards"
    (copy / "sub").mkdir()
    proc = run_cli("check", "--format", "json", "--shard", "2/3", "../models/syntax.py", "../models", cwd=copy / "sub", env=env(cache))
    assert proc.returncode in (0, 1), proc.stderr
    there = json.loads(proc.stdout)["shard"]
    here = json.loads((project / "shard-2.json").read_text())["shard"]
    assert there["assignment"] == here["assignment"] and there["files"] == here["files"]
    assert there["sources"] == here["sources"] and there["settings"] == here["settings"]
    assert (there["folder"], here["folder"]) == ("sub", ".")
    # Its report's paths start in sub/: merged with reports made from the root, refused.
    (copy / "sub" / "there.json").write_text(proc.stdout)
    refused = merged(copy, "shard-1.json", "sub/there.json", "shard-3.json")
    assert refused.returncode == 3 and "different folders" in refused.stderr, refused.stderr


def test_balance_follows_recorded_durations(project: Path, tmp_path: Path) -> None:
    cache = project.parent / "cache-shards"
    durations = tmp_path / "durations.json"
    proc = run_cli("check", "--format", "json", "--store-durations", str(durations), cwd=project, env=env(cache))
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    stored = json.loads(durations.read_text())
    exported = {f["path"]: sum(t["export_ms"] for t in f["targets"] if t["export_ms"] is not None) / 1000 for f in report["files"] if f["targets"]}
    # Each file's job time: its exports and what surrounds them (loading, the program run).
    assert set(stored) == {f["path"] for f in report["files"]} - {"models/gone.py"}
    assert all(stored[k] >= round(v, 1) - 0.051 for k, v in exported.items()) and sum(stored.values()) > sum(exported.values())
    # One slow file: it has a shard of its own, the others share the other.
    durations.write_text(json.dumps({**stored, "models/counter.py": 300.0}))
    files = [json.loads(shard_run(project, k, 2, cache, "--durations", str(durations))[1])["shard"] for k in (1, 2)]
    assert [f["durations"] for f in files] == ["file", "file"]
    alone = next(f["files"] for f in files if "models/counter.py" in f["files"])
    assert alone == ["models/counter.py"]
    # The same with another file slow.
    durations.write_text(json.dumps({**stored, "models/mlp.py": 300.0}))
    files = [json.loads(shard_run(project, k, 2, cache, "--durations", str(durations))[1])["shard"] for k in (1, 2)]
    assert next(f["files"] for f in files if "models/mlp.py" in f["files"]) == ["models/mlp.py"]
    # --durations cache: a cache that holds every file's result balances by it, one
    # that does not (or none) counts every file the same, as no --durations does.
    assert json.loads(shard_run(project, 1, 2, cache, "--durations", "cache")[1])["shard"]["durations"] == "cache"
    assert json.loads(shard_run(project, 1, 2, cache, "--durations", "cache", "--no-cache")[1])["shard"]["durations"] == "none"
    assert json.loads(shard_run(project, 1, 2, cache)[1])["shard"]["durations"] == "none"
    # A durations file that is not one is a usage error.
    durations.write_text('{"models/mlp.py": "slow"}')
    proc = run_cli("check", "--shard", "1/2", "--durations", str(durations), cwd=project, env=env(cache))
    assert proc.returncode == 2 and "must be a number of seconds" in proc.stderr, proc.stderr


# -- the assignment itself (in process: no model runs) ----------------------------------


def _greedy(keys: list[str], durations: dict[str, float], count: int) -> dict[str, int]:
    """The obvious alternative: slowest first, each to the least loaded shard."""
    load = weights(keys, durations)
    totals = [0.0] * count
    out = {}
    for key in sorted(load, key=lambda k: (-load[k], k)):
        shard = min(range(count), key=lambda i: (totals[i], i))
        out[key] = shard + 1
        totals[shard] += load[key]
    return out


def test_adding_a_file_moves_few_others() -> None:
    rng = random.Random(30)
    moved, moved_greedy, worst = [], [], 0.0
    for _ in range(40):
        keys = [f"models/m{rng.randrange(10**6)}.py" for _ in range(40)]
        durations = {k: rng.lognormvariate(0, 1.2) for k in keys}
        before = assign(keys, durations, 3)
        new = f"models/new{rng.randrange(10**6)}.py"  # never exported: no recorded time
        after = assign([*keys, new], durations, 3)
        assert set(after) == {*keys, new}
        moved.append(sum(before[k] != after[k] for k in keys))
        greedy_before, greedy_after = _greedy(keys, durations, 3), _greedy([*keys, new], durations, 3)
        moved_greedy.append(sum(greedy_before[k] != greedy_after[k] for k in keys))
        load = weights(keys, durations)
        totals = [sum(load[k] for k in keys if before[k] == s) for s in (1, 2, 3)]
        worst = max(worst, max(totals) / max(sum(totals) / 3, max(load.values())))
    mean, mean_greedy = sum(moved) / len(moved), sum(moved_greedy) / len(moved_greedy)
    print(f"files moved by adding one to 40: {mean:.1f} on average (greedy: {mean_greedy:.1f}); worst shard / mean {worst:.3f}")
    assert mean <= 0.15 * 40 and mean < mean_greedy / 2
    assert worst <= 1 + EPSILON + 1e-6


def test_the_assignment_is_deterministic_and_new_files_spread_evenly() -> None:
    keys = [f"models/variant_{i:03}.py" for i in range(300)]
    shuffled = random.Random(1).sample(keys, len(keys))
    assert assign(keys, {}, 4) == assign(shuffled, {}, 4)
    counts = [sum(1 for s in assign(keys, {}, 4).values() if s == k) for k in (1, 2, 3, 4)]
    assert max(counts) <= 300 / 4 * (1 + EPSILON) + 1, counts
    # Unknown files next to known ones count as the median.
    durations = {k: 2.0 for k in keys[:200]}
    shards = assign(keys, durations, 4)
    assert sorted(sum(1 for k in keys[200:] if shards[k] == s) for s in (1, 2, 3, 4))[0] >= 15


def test_files_are_named_relative_to_their_project(tmp_path: Path) -> None:
    for where in ("a", "b"):
        (tmp_path / where / "models").mkdir(parents=True)
        (tmp_path / where / "pyproject.toml").write_text("")
        (tmp_path / where / "models" / "m.py").write_text("")
    (tmp_path / "a" / "models" / "only.py").write_text("")
    a, b, only = (str(tmp_path / "a/models/m.py"), str(tmp_path / "b/models/m.py"), str(tmp_path / "a/models/only.py"))
    assert file_keys([only]) == {only: "models/only.py"}
    keys = file_keys([a, b, only])
    assert keys[only] == "models/only.py" and keys[a] != keys[b]  # a clash: named by the path from here
