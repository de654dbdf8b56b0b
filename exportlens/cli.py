"""The ``exportlens`` command: ``check``, ``show``, ``cache`` and ``serve``. Torch-free:
flags become ``exportlens.core.pipeline`` overrides, and the pipeline answers from the
result cache or exports in worker processes, as it does for the language server."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time

from exportlens.core.cache.store import ResultCache
from exportlens.core.pipeline import Overrides, Pipeline
from exportlens.core.project.files import walk
from exportlens.core.project.settings import DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT_S
from exportlens.report import format_text, summary, to_json


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="exportlens", description="torch.export feedback at your own lines.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{check,show,serve,cache}")

    check = sub.add_parser("check", help="export every target under PATH and print diagnostics")
    check.add_argument("paths", nargs="+", metavar="PATH")
    check.add_argument("--format", choices=("text", "json"), default="text")
    check.add_argument("--timeout", type=_positive_float, default=None, metavar="SECONDS", help=f"per-target limit (default: pyproject's [tool.exportlens] timeout, else {DEFAULT_TIMEOUT_S:.0f})")
    check.add_argument("--memory-mb", type=_positive_int, default=None, metavar="MB", help=f"memory cap of an export (default: pyproject's [tool.exportlens] memory_mb, else {DEFAULT_MEMORY_MB})")
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
        overrides = Overrides(timeout_s=args.timeout, memory_mb=args.memory_mb, strict=args.strict or None, cache=not args.no_cache, cache_dir=args.cache_dir)
        return _check(args.paths, fmt=args.format, pipeline=Pipeline(overrides), jobs=args.jobs, signatures=not args.no_signatures)
    if args.command == "show":
        if not os.path.isfile(args.file):
            print(f"exportlens show: {args.file}: no such file", file=sys.stderr)
            return 2
        overrides = Overrides(timeout_s=args.timeout, cache=not args.no_cache, cache_dir=args.cache_dir)
        return _check([args.file], fmt="show", pipeline=Pipeline(overrides), jobs=1, signatures=True)
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


def _cache_command(action: str, cli_dir: str | None) -> int:
    # Outside a check there is no model file: the current folder's pyproject decides.
    directory = Pipeline(Overrides(cache_dir=cli_dir)).cache_dir(os.path.join(os.getcwd(), "_"))
    if action == "dir":
        print(directory)
        return 0
    removed = ResultCache(directory).clear()
    print(f"Removed {removed} cached result{'s' * (removed != 1)} from {directory}")
    return 0


def _check(paths: list[str], *, fmt: str, pipeline: Pipeline, jobs: int | None, signatures: bool) -> int:
    files, missing = walk(paths)
    for p in missing:
        print(f"exportlens: {p}: no such file or directory", file=sys.stderr)
    if missing:
        return 2
    started = time.perf_counter()
    from exportlens.core.isolation.pool import WorkerError  # torch-free, like the rest of the CLI

    try:
        batch = pipeline.run(files, jobs)  # no files: no workers, an empty batch
    except WorkerError as e:  # no worker process can start: nothing could be checked
        print(f"exportlens: {e}", file=sys.stderr)
        return 2
    results = batch.results
    elapsed = time.perf_counter() - started
    if fmt == "json":
        sys.stdout.write(json.dumps(to_json(results), indent=2) + "\n")
    else:
        text = format_text(results, signatures=signatures)
        if text:
            print(text)
        if fmt != "show":
            print(("\n" if text else "") + summary(results, elapsed, cached=batch.hits))
    sys.stdout.flush()
    return 1 if any(r.has_errors for r in results) else 0
