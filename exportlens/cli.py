"""The ``exportlens`` command: ``check``, ``show`` and ``serve``. Torch-free: the
exports run in worker processes (``exportlens.core.isolation.pool``)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path

from exportlens.core.cache.store import ResultCache, default_cache_dir
from exportlens.core.isolation.messages import ExportRequest, Limits
from exportlens.core.model.results import FileResult
from exportlens.discover import Settings, root_of, settings_for, walk
from exportlens.report import format_text, summary, to_json

DEFAULT_TIMEOUT = 120.0
DEFAULT_MEMORY_MB = 8192


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="exportlens", description="torch.export feedback at your own lines.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{check,show,serve,cache}")

    check = sub.add_parser("check", help="export every target under PATH and print diagnostics")
    check.add_argument("paths", nargs="+", metavar="PATH")
    check.add_argument("--format", choices=("text", "json"), default="text")
    check.add_argument("--timeout", type=_positive_float, default=None, metavar="SECONDS", help=f"per-target limit (default: pyproject's [tool.exportlens] timeout, else {DEFAULT_TIMEOUT:.0f})")
    check.add_argument("--memory-mb", type=_positive_int, default=None, metavar="MB", help=f"memory cap of an export (default {DEFAULT_MEMORY_MB})")
    check.add_argument("--jobs", "-j", type=_positive_int, default=None, metavar="N", help="files exported in parallel (default: number of cores)")
    check.add_argument("--strict", action="store_true", help="export with strict=True unless a target says otherwise")
    check.add_argument("--no-signatures", action="store_true", help="text format: print diagnostics only")
    _cache_options(check)

    show = sub.add_parser("show", help="print the signature of every target in FILE")
    show.add_argument("file", metavar="FILE")
    show.add_argument("--timeout", type=_positive_float, default=None, metavar="SECONDS")
    _cache_options(show)

    cache = sub.add_parser("cache", help="the result cache: clear it, or print where it is")
    cache_sub = cache.add_subparsers(dest="action", required=True, metavar="{clear,dir}")
    for action, help_text in (("clear", "delete every cached result"), ("dir", "print the cache's folder")):
        p = cache_sub.add_parser(action, help=help_text)
        p.add_argument("--cache-dir", default=None, metavar="DIR", help=_CACHE_DIR_HELP)

    serve = sub.add_parser("serve", help="the language server on stdio")
    serve.add_argument("--tcp", metavar="HOST:PORT", default=None)
    return parser


_CACHE_DIR_HELP = "the result cache's folder (default: $EXPORTLENS_CACHE_DIR, else pyproject's [tool.exportlens] cache_dir, else the user cache folder)"


def _cache_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-cache", action="store_true", help="export everything; neither read nor write the result cache")
    parser.add_argument("--cache-dir", default=None, metavar="DIR", help=_CACHE_DIR_HELP)


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
    if args.command in ("check", "show", "cache"):
        _log_to_stderr()  # the server sets up its own logging
    if args.command == "check":
        caches = None if args.no_cache else Caches(args.cache_dir)
        return _check(args.paths, fmt=args.format, timeout=args.timeout, memory_mb=args.memory_mb, jobs=args.jobs, strict=args.strict, signatures=not args.no_signatures, caches=caches)
    if args.command == "show":
        if not os.path.isfile(args.file):
            print(f"exportlens show: {args.file}: no such file", file=sys.stderr)
            return 2
        caches = None if args.no_cache else Caches(args.cache_dir)
        return _check([args.file], fmt="show", timeout=args.timeout, memory_mb=None, jobs=1, strict=False, signatures=True, caches=caches)
    if args.command == "cache":
        return _cache_command(args.action, args.cache_dir)
    from exportlens.server.app import main

    return main(args.tcp)


def _log_to_stderr() -> None:
    """Warnings of the library (an unreadable cache entry...) as ``exportlens: ...`` lines."""
    logger = logging.getLogger("exportlens")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("exportlens: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.WARNING)


class Caches:
    """The result cache of each file. Its folder, by priority: ``--cache-dir``,
    ``$EXPORTLENS_CACHE_DIR``, the file's ``[tool.exportlens] cache_dir``, the user cache."""

    def __init__(self, cli_dir: str | None) -> None:
        self.cli_dir = cli_dir
        self.hits = 0
        self._by_dir: dict[Path, ResultCache] = {}

    def directory(self, settings: Settings) -> Path:
        if self.cli_dir:
            return Path(self.cli_dir).expanduser().absolute()
        if not os.environ.get("EXPORTLENS_CACHE_DIR") and settings.cache_dir:
            return Path(settings.cache_dir)
        return default_cache_dir()

    def for_settings(self, settings: Settings) -> ResultCache:
        directory = self.directory(settings)
        if directory not in self._by_dir:
            self._by_dir[directory] = ResultCache(directory)
        return self._by_dir[directory]


def export_files(files: list[str], *, timeout: float | None, memory_mb: int | None, jobs: int | None, strict: bool, caches: Caches | None = None) -> list[FileResult]:
    """Export every file in worker processes, or take its result from the cache;
    results sorted by path. Workers start only when some file is not cached."""
    results: list[FileResult] = []
    misses: list[tuple[ExportRequest, ResultCache | None]] = []
    for i, path in enumerate(files):
        s = settings_for(path)
        limits = Limits(timeout_s=timeout or s.timeout_s or DEFAULT_TIMEOUT, memory_mb=memory_mb or s.memory_mb or DEFAULT_MEMORY_MB)
        request = ExportRequest(id=i, path=path, root=root_of(path), limits=limits, strict_default=strict or bool(s.strict))
        cache = caches.for_settings(s) if caches is not None else None
        hit = cache.lookup(request) if cache is not None else None
        if hit is not None:
            assert caches is not None
            caches.hits += 1
            results.append(hit)
        else:
            misses.append((request, cache))
    if misses:
        from exportlens.core.isolation.pool import WorkerPool

        by_path = {request.path: (request, cache) for request, cache in misses}  # walk() lists a path once
        workers = max(1, min(jobs or os.cpu_count() or 1, len(misses)))
        with WorkerPool(jobs=workers) as pool:
            for result in pool.run(request for request, _ in misses):
                results.append(result)
                request, cache = by_path.get(result.path, (None, None))
                if request is not None and cache is not None:
                    cache.store(request, result)
    return sorted(results, key=lambda r: r.path)


def _cache_command(action: str, cli_dir: str | None) -> int:
    # Outside a check there is no model file: the current folder's pyproject decides.
    directory = Caches(cli_dir).directory(settings_for(os.path.join(os.getcwd(), "_")))
    if action == "dir":
        print(directory)
        return 0
    removed = ResultCache(directory).clear()
    print(f"Removed {removed} cached result{'s' * (removed != 1)} from {directory}")
    return 0


def _check(paths: list[str], *, fmt: str, timeout: float | None, memory_mb: int | None, jobs: int | None, strict: bool, signatures: bool, caches: Caches | None) -> int:
    files, missing = walk(paths)
    for p in missing:
        print(f"exportlens: {p}: no such file or directory", file=sys.stderr)
    if missing:
        return 2
    started = time.perf_counter()
    results = export_files(files, timeout=timeout, memory_mb=memory_mb, jobs=jobs, strict=strict, caches=caches) if files else []
    elapsed = time.perf_counter() - started
    if fmt == "json":
        sys.stdout.write(json.dumps(to_json(results), indent=2) + "\n")
    else:
        text = format_text(results, signatures=signatures)
        if text:
            print(text)
        if fmt != "show":
            print(("\n" if text else "") + summary(results, elapsed, cached=caches.hits if caches else 0))
    sys.stdout.flush()
    return 1 if any(r.has_errors for r in results) else 0
