"""The ``exportlens`` command: ``check``, ``show`` and ``serve``. Torch-free: the
exports run in worker processes (``exportlens.core.pool``)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from exportlens.core.protocol import ExportRequest, Limits
from exportlens.core.results import FileResult
from exportlens.discover import settings_for, walk
from exportlens.report import format_text, summary, to_json

DEFAULT_TIMEOUT = 120.0
DEFAULT_MEMORY_MB = 8192


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="exportlens", description="torch.export feedback at your own lines.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{check,show,serve}")

    check = sub.add_parser("check", help="export every target under PATH and print diagnostics")
    check.add_argument("paths", nargs="+", metavar="PATH")
    check.add_argument("--format", choices=("text", "json"), default="text")
    check.add_argument("--timeout", type=_positive_float, default=None, metavar="SECONDS", help=f"per-target limit (default: pyproject's [tool.exportlens] timeout, else {DEFAULT_TIMEOUT:.0f})")
    check.add_argument("--memory-mb", type=_positive_int, default=None, metavar="MB", help=f"memory cap of an export (default {DEFAULT_MEMORY_MB})")
    check.add_argument("--jobs", "-j", type=_positive_int, default=None, metavar="N", help="files exported in parallel (default: number of cores)")
    check.add_argument("--strict", action="store_true", help="export with strict=True unless a target says otherwise")
    check.add_argument("--no-signatures", action="store_true", help="text format: print diagnostics only")

    show = sub.add_parser("show", help="print the signature of every target in FILE")
    show.add_argument("file", metavar="FILE")
    show.add_argument("--timeout", type=_positive_float, default=None, metavar="SECONDS")

    serve = sub.add_parser("serve", help="the language server on stdio")
    serve.add_argument("--tcp", metavar="HOST:PORT", default=None)
    return parser


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be positive")
    return value


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be a positive integer")
    return value


def run(argv: list[str]) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0) if e.code in (0, None) else 2
    if args.command == "check":
        return _check(args.paths, fmt=args.format, timeout=args.timeout, memory_mb=args.memory_mb, jobs=args.jobs, strict=args.strict, signatures=not args.no_signatures)
    if args.command == "show":
        if not os.path.isfile(args.file):
            print(f"exportlens show: {args.file}: no such file", file=sys.stderr)
            return 2
        return _check([args.file], fmt="show", timeout=args.timeout, memory_mb=None, jobs=1, strict=False, signatures=True)
    print("exportlens serve: the language server is not part of this version yet", file=sys.stderr)
    return 2


def export_files(files: list[str], *, timeout: float | None, memory_mb: int | None, jobs: int | None, strict: bool) -> list[FileResult]:
    """Export every file in worker processes; results sorted by path."""
    from exportlens.core.pool import WorkerPool

    requests = []
    for i, path in enumerate(files):
        s = settings_for(path)
        limits = Limits(timeout_s=timeout or s.timeout_s or DEFAULT_TIMEOUT, memory_mb=memory_mb or s.memory_mb or DEFAULT_MEMORY_MB)
        requests.append(ExportRequest(id=i, path=path, root=_root_of(path), limits=limits, strict_default=strict or bool(s.strict)))
    workers = max(1, min(jobs or os.cpu_count() or 1, len(requests)))
    with WorkerPool(jobs=workers) as pool:
        results = list(pool.run(requests))
    return sorted(results, key=lambda r: r.path)


def _root_of(path: str) -> str:
    """The project root: the folder of the nearest pyproject.toml or .git, else the file's folder."""
    directory = os.path.dirname(os.path.abspath(path))
    probe = directory
    while True:
        if os.path.exists(os.path.join(probe, "pyproject.toml")) or os.path.exists(os.path.join(probe, ".git")):
            return probe
        parent = os.path.dirname(probe)
        if parent == probe:
            return directory
        probe = parent


def _check(paths: list[str], *, fmt: str, timeout: float | None, memory_mb: int | None, jobs: int | None, strict: bool, signatures: bool) -> int:
    files, missing = walk(paths)
    for p in missing:
        print(f"exportlens: {p}: no such file or directory", file=sys.stderr)
    if missing:
        return 2
    started = time.perf_counter()
    results = export_files(files, timeout=timeout, memory_mb=memory_mb, jobs=jobs, strict=strict) if files else []
    elapsed = time.perf_counter() - started
    if fmt == "json":
        sys.stdout.write(json.dumps(to_json(results), indent=2) + "\n")
    else:
        text = format_text(results, signatures=signatures)
        if text:
            print(text)
        if fmt != "show":
            print(("\n" if text else "") + summary(results, elapsed))
    sys.stdout.flush()
    return 1 if any(r.has_errors for r in results) else 0
