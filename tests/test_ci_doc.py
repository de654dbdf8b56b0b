"""docs/ci.md's recipes run as written (issue 30, point 7): the commands of its GitHub
Actions workflow, GitLab pipeline and Kubernetes Jobs are taken out of the page (the
YAML parsed, the CI's variables set as each system sets them), the three shards run
as three concurrent processes, each with the cache its recipe gives it, then the
report job's commands: its merged report must be the single run's, with its exit status.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT, run_cli
from tests.e2e.test_shard import masked, write_project

DOC = ROOT / "docs" / "ci.md"
BIN = str(Path(sys.executable).parent)  # where the `exportlens` command is


def blocks(heading: str, lang: str) -> list[str]:
    """The fenced ``lang`` blocks of the section ``## heading``."""
    text = DOC.read_text()
    section = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{lang}\n(.*?)```", section, flags=re.S)


def shell(command: str, cwd: Path, env: dict[str, str], sh: str = "bash") -> subprocess.Popen[str]:
    """``command`` as a CI runner runs a step: a shell that stops at the first failure."""
    full = dict(os.environ, PYTHONWARNINGS="ignore", PATH=BIN + os.pathsep + os.environ["PATH"], **env)
    flags = ["-e", "-c"] if sh == "bash" else ["-c"]
    return subprocess.Popen([sh, *flags, command], cwd=cwd, env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=900)
    return proc.returncode, out, err


def exportlens_lines(commands: list[str]) -> list[str]:
    """The commands that run exportlens (not ``pip install``: the test's own is in use)."""
    return [c for c in commands if c.lstrip().startswith("exportlens ")]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/e2e/test_shard.py's project (without a snapshot), the single run of each
    format kept as single.FORMAT, and the durations file written as ci.md says."""
    project = tmp_path_factory.mktemp("ci-doc") / "checkout"
    project.mkdir()
    write_project(project)
    (project / "models/gone.py").unlink()
    cache = project.parent / "cache-single"
    for fmt in ("text", "json", "sarif", "github"):
        proc = run_cli("check", "--format", fmt, "--jobs", "2", "--output-format", "concise", cwd=project, env={"EXPORTLENS_CACHE_DIR": str(cache)})
        assert proc.returncode == 1, proc.stderr
        (project / f"single.{fmt}").write_text(proc.stdout)
    [store] = blocks("How the files are split", "sh")
    status, _, err = finish(shell(store, project, {"EXPORTLENS_CACHE_DIR": str(cache)}))
    assert status == 1, err  # the check's own status: the project has errors
    durations = json.loads((project / "exportlens.durations.json").read_text())
    assert set(durations) == {"models/mlp.py", "models/counter.py", "models/inplace.py", "models/head.py", "models/broken.py", "models/syntax.py"}
    return project


def run_shards(commands: list[tuple[str, dict[str, str]]], cwd: Path, sh: str = "bash") -> None:
    """The shards' commands at once, as the runners would; each must succeed."""
    procs = [shell(c, cwd, env, sh) for c, env in commands]
    for proc in procs:
        status, _, err = finish(proc)
        assert status == 0, err


def clean(project: Path) -> None:
    for report in project.glob("shard-*.json"):
        report.unlink()
    shutil.rmtree(project / ".exportlens-cache", ignore_errors=True)


def test_the_github_actions_workflow(project: Path) -> None:
    [text] = blocks("GitHub Actions", "yaml")
    workflow: dict[str, Any] = yaml.safe_load(text)
    check, report = workflow["jobs"]["check"], workflow["jobs"]["report"]
    shards = check["strategy"]["matrix"]["shard"]
    assert shards == [1, 2, 3] and report["needs"] == "check"
    assert any(s.get("uses", "").startswith("actions/cache@") and s["with"]["path"] == ".exportlens-cache" for s in check["steps"])
    assert any(s.get("uses", "").startswith("github/codeql-action/upload-sarif@") for s in report["steps"])
    clean(project)

    def github(text: str, shard: int | None = None) -> str:
        text = text.replace("${{ github.workspace }}", str(project))
        return text.replace("${{ matrix.shard }}", str(shard)) if shard is not None else text

    env = {k: github(v) for k, v in check["env"].items()}
    [step] = exportlens_lines([s["run"] for s in check["steps"] if "run" in s])
    # One actions/cache entry per shard: each runner starts with its own cache folder.
    run_shards([(github(step, k), {**env, "EXPORTLENS_CACHE_DIR": env["EXPORTLENS_CACHE_DIR"] + f"-{k}"}) for k in shards], project)
    *merges, annotate = exportlens_lines([s["run"] for s in report["steps"] if "run" in s])
    for command in merges:
        status, _, err = finish(shell(command, project, {}))
        assert status == 0, err
    assert masked((project / "exportlens.sarif").read_text()) == masked((project / "single.sarif").read_text())
    status, out, err = finish(shell(annotate, project, {}))
    assert status == 1, err  # fails as the single run does
    assert masked(out) == masked((project / "single.github").read_text())


def test_the_gitlab_pipeline(project: Path) -> None:
    [text] = blocks("GitLab CI", "yaml")
    pipeline: dict[str, Any] = yaml.safe_load(text)
    job, report = pipeline["exportlens"], pipeline["exportlens-report"]
    total = job["parallel"]
    assert total == 3 and report["needs"] == ["exportlens"]
    clean(project)

    def gitlab(k: int) -> dict[str, str]:
        ci = {"CI_PROJECT_DIR": str(project), "CI_NODE_INDEX": str(k), "CI_NODE_TOTAL": str(total)}
        variables = {name: re.sub(r"\$(\w+)", lambda m: ci[m.group(1)], value) for name, value in job["variables"].items()}
        return {**ci, **variables}

    [script] = exportlens_lines(job["script"])
    # The cache's key is per node: each runs with a fresh folder (cleaned above, and
    # one per node here, as the runners would restore them).
    run_shards([(script, {**gitlab(k), "EXPORTLENS_CACHE_DIR": gitlab(k)["EXPORTLENS_CACHE_DIR"] + f"-{k}"}) for k in range(1, total + 1)], project)
    *first, last = exportlens_lines(report["script"])
    for command in first:
        status, _, err = finish(shell(command, project, {}))
        assert status == 0, err
    assert masked((project / "exportlens.sarif").read_text()) == masked((project / "single.sarif").read_text())
    status, out, err = finish(shell(last, project, {}))
    assert status == 1, err
    assert masked(out) == masked((project / "single.text").read_text())
    # --format concise (docs/contract.md) is the same as --output-format concise.
    status, concise, err = finish(shell("exportlens merge --format concise shard-*.json", project, {}))
    assert status == 1 and concise == out, err


def test_the_kubernetes_indexed_job(project: Path, tmp_path: Path) -> None:
    [text] = blocks("Kubernetes: an indexed Job", "yaml")
    check, report = list(yaml.safe_load_all(text))
    spec = check["spec"]
    assert spec["completionMode"] == "Indexed" and spec["completions"] == 3
    clean(project)
    shared = tmp_path / "shared"  # the ReadWriteMany volume
    shared.mkdir()

    def pod(job: dict[str, Any]) -> tuple[str, dict[str, str], Path]:
        [container] = job["spec"]["template"]["spec"]["containers"]
        assert container["command"] == ["sh", "-c"] and container["workingDir"] == "/src"
        [mount] = container["volumeMounts"]
        env = {e["name"]: e["value"].replace(mount["mountPath"], str(shared)) for e in container.get("env", [])}
        [args] = container["args"]
        return args.replace(mount["mountPath"], str(shared)), env, project  # /src: the checkout

    command, env, cwd = pod(check)
    run_shards([(command, {**env, "JOB_COMPLETION_INDEX": str(i)}) for i in range(spec["completions"])], cwd, sh="sh")
    assert sorted(p.name for p in shared.glob("shard-*.json")) == ["shard-1.json", "shard-2.json", "shard-3.json"]
    command, env, cwd = pod(report)
    status, out, err = finish(shell(command, cwd, env, sh="sh"))
    assert status == 1, err
    assert masked(out) == masked(run_cli("check", "--jobs", "2", cwd=project, env={"EXPORTLENS_CACHE_DIR": str(project.parent / "cache-single")}).stdout)
    assert masked((shared / "report.json").read_text()) == masked((project / "single.json").read_text())
