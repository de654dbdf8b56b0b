"""The ``exportlens`` command: ``check``, ``merge``, ``snapshot``, ``show``, ``cache``, ``trust`` and ``serve``. Torch-free:
flags become ``exportlens.core.pipeline`` overrides, and the pipeline answers from the
result cache or exports in worker processes, as it does for the language server."""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
import time
from typing import Any, Callable

from exportlens import graph_command, merge_command, trust_command
from exportlens.core.cache.store import ResultCache
from exportlens.core.model.results import Diagnostic, FileResult
from exportlens.core.pipeline import Overrides, Pipeline
from exportlens.core.project.files import root_of, survey, without_declared
from exportlens.core.project.settings import (
    DEFAULT_MEMORY_MB,
    DEFAULT_TIMEOUT_S,
    MEMORY_RANGE_MB,
    START_METHOD_CHOICES,
    TIMEOUT_RANGE_S,
    WEIGHTS_CHOICES,
)
from exportlens.module_views import run_with_views
from exportlens.output import View, log_to_stderr, print_report
from exportlens.progress import Progress, wanted
from exportlens.report import display_path, format_text
from exportlens.shard import DurationsError, Plan, Shard, parse_shard

FORMATS = ("text", "json", "sarif", "github")
OUTPUT_FORMATS = ("full", "concise")

EXAMPLES = """examples:
  exportlens check                          check the project of the current folder
  exportlens check models/ --jobs 4         the model files under models/, 4 at a time
  exportlens check --watch                  check again whatever each save changes (Ctrl-C stops)
  exportlens check --output-format concise  one line per diagnostic
  exportlens check --format json > out.json the report for tools (also sarif, github)
  exportlens check --shard 2/3 --format json > shard-2.json
                                            the second of three parts (one per CI runner)
  exportlens merge shard-*.json --format sarif
                                            the parts as one report, as one run prints it
  exportlens snapshot                       record the signatures in exportlens.snapshot.json
  exportlens show models/mlp.py             the signature of each target in a file
  exportlens graph models/mlp.py --open     the exported graph as a picture in a browser
  exportlens trust                          let the language server run this folder's models
  python -P -m exportlens serve             the language server on stdio, for any LSP editor

colour: on a terminal; NO_COLOR=1 turns it off, FORCE_COLOR=1 on.
docs: README.md, docs/getting-started.md, docs/contract.md, docs/editors.md"""


def _parser() -> argparse.ArgumentParser:
    from exportlens import about

    parser = argparse.ArgumentParser(prog="exportlens", description="torch.export feedback at your own lines.", epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=about.short())
    sub = parser.add_subparsers(dest="command", required=True, metavar="{check,merge,snapshot,show,graph,serve,trust,cache,version}")

    check = sub.add_parser("check", help="export every target under PATH (default: the project) and print diagnostics", epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    check.add_argument("paths", nargs="*", metavar="PATH", help=_PATHS_HELP)
    check.add_argument("--format", choices=FORMATS, default="text", help="text for people, json for tools, sarif for code scanning, github for pull-request annotations")
    check.add_argument("--output-format", choices=OUTPUT_FORMATS, default="full", help="text format: full shows each diagnostic's source lines with the span underlined and its notes; concise one line each")
    check.add_argument("--watch", "-w", action="store_true", help="keep checking: after the first check, check again what each change affects, until Ctrl-C")
    _export_options(check)
    check.add_argument("--no-signatures", action="store_true", help="text format: print diagnostics only")
    check.add_argument("--fix", action="store_true", help="apply the verified preferred fixes (each exported again with the model's outputs kept) to the files, then report what remains")
    check.add_argument("--diff", action="store_true", help="print the fixes --fix would apply as a unified diff, and write nothing (exit 1 when there are some)")
    check.add_argument("--unsafe-fixes", action="store_true", help="with --fix or --diff: also the verified fixes that are not preferred (one per diagnostic: they may change what the program accepts or computes, as their titles say)")
    _lower_options(check)
    _cache_options(check)
    check.add_argument("--shard", type=parse_shard, default=None, metavar="K/N", help="check only part K of N (from 1): each model file is in exactly one part, balanced by recorded export times; the JSON report says which files, for exportlens merge")
    check.add_argument("--durations", default=None, metavar="FILE", help="--shard: balance by the export times in FILE (written by --store-durations; commit it, so every runner reads the same); 'cache': those of the results in the cache, when it holds every file's (default: every file counts the same)")
    check.add_argument("--store-durations", default=None, metavar="FILE", help="write the seconds each checked file's job took (loading, exporting, running, lowering) to FILE (JSON; entries of other files are kept), for --durations")

    merge_command.add_parser(sub, FORMATS, OUTPUT_FORMATS)

    snapshot = sub.add_parser("snapshot", help="record every target's signature in exportlens.snapshot.json at the project root")
    snapshot.add_argument("paths", nargs="*", metavar="PATH", help=_PATHS_HELP)
    _export_options(snapshot)
    _cache_options(snapshot)

    sub.add_parser("version", help="the versions of exportlens, torch, Python and the formats (without importing torch)")

    show = sub.add_parser("show", help="print the signature of every target in PATH (a file, or the model files under a folder)")
    show.add_argument("file", metavar="PATH")
    show.add_argument("--timeout", type=_seconds, default=None, metavar="SECONDS")
    show.add_argument("--weights", choices=WEIGHTS_CHOICES, default=None, help="as for check")
    _start_method_option(show)
    _cache_options(show)

    cache = sub.add_parser("cache", help="the result cache: clear it, or print where it is")
    cache_sub = cache.add_subparsers(dest="action", required=True, metavar="{clear,dir}")
    for action, help_text in (("clear", "delete every cached result"), ("dir", "print the cache's folder")):
        p = cache_sub.add_parser(action, help=help_text)
        p.add_argument("--cache-dir", default=None, metavar="DIR", help=_CACHE_DIR_HELP)

    trust_command.add_parser(sub)
    graph_command.add_parser(sub)

    serve = sub.add_parser("serve", help="the language server on stdio (or a socket)", description=_SERVE_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    where = serve.add_mutually_exclusive_group()
    where.add_argument("--tcp", metavar="HOST:PORT", default=None, help="listen on HOST:PORT instead of stdio (port 0: any free port, printed on stderr); each connection must pass the token in initialize; HOST must be a loopback address unless --allow-remote")
    where.add_argument("--socket", metavar="PATH", default=None, help="listen on a Unix domain socket at PATH, created with mode 0600 (only you can connect: no token); removed at exit")
    serve.add_argument("--token-file", metavar="FILE", default=None, help="--tcp: the token is the first line of FILE (default: $EXPORTLENS_TOKEN, else one generated and printed on stderr)")
    serve.add_argument("--allow-remote", action="store_true", help="--tcp: allow a HOST that is not loopback; the token is still required and the traffic is NOT encrypted (prefer an SSH tunnel)")
    return parser


_SERVE_DESCRIPTION = """The language server. Every file a client opens has its model code run, so a
socket server admits a connection only by its first message: initialize, with
--tcp the token in "initializationOptions": {"exportlens": {"token": "..."}}.
One client is served at a time; the server exits when it disconnects.
It runs nothing in a folder you have not trusted (exportlens trust FOLDER, or the
editor command exportlens.trust), unless the client says its workspace is trusted
("initializationOptions": {"trusted": true}, as VS Code's extension does)."""

_PATHS_HELP = "files and folders to check (default: the project of the current folder: the nearest pyproject.toml or .git)"


def _export_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--timeout", type=_seconds, default=None, metavar="SECONDS", help=f"per-target limit (default: pyproject's [tool.exportlens] timeout, else {DEFAULT_TIMEOUT_S:.0f})")
    parser.add_argument("--memory-mb", type=_megabytes, default=None, metavar="MB", help=f"memory cap of an export (default: pyproject's [tool.exportlens] memory_mb, else {DEFAULT_MEMORY_MB})")
    parser.add_argument("--jobs", "-j", type=_jobs, default=None, metavar="N", help="files exported in parallel (default: number of cores)")
    parser.add_argument("--strict", action="store_true", help="export with strict=True unless a target says otherwise")
    parser.add_argument("--weights", choices=WEIGHTS_CHOICES, default=None, help="auto: build large weights without values (the export never reads them) and use real ones only where a step needs them; real: always materialise them (default: pyproject's [tool.exportlens] weights, else auto)")
    _start_method_option(parser)
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress line and no summary: the diagnostics (and signatures) only")


def _start_method_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--start-method",
        choices=START_METHOD_CHOICES,
        default=None,
        help="how the workers start each export process: fork a warm worker (Linux's default) or spawn a fresh interpreter, one started ahead (macOS's and Windows's); auto: the next source's, else the platform's (default: $EXPORTLENS_START_METHOD, pyproject's [tool.exportlens] start_method, else auto)",
    )


def project_folder(cwd: str | None = None) -> str:
    """What ``check`` and ``snapshot`` take without a PATH: the folder of the nearest
    pyproject.toml or .git at or above the current folder, else the current folder."""
    return root_of(os.path.join(cwd or os.getcwd(), "_"))


_CACHE_DIR_HELP = "the result cache's folder (default: $EXPORTLENS_CACHE_DIR, else pyproject's [tool.exportlens] cache_dir, else the user cache folder)"


def _cache_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-cache", action="store_true", help="export everything; neither read nor write the result cache")
    parser.add_argument("--cache-dir", default=None, metavar="DIR", help=_CACHE_DIR_HELP)
    parser.add_argument(
        "--cache-url",
        default=None,
        metavar="URL",
        help="a shared cache read after the folder: s3://bucket/prefix (endpoint and credentials as the AWS SDKs read them, $AWS_ENDPOINT_URL included), gs://, az:// or file:///folder; "
        "'' for none (default: $EXPORTLENS_CACHE_URL, else pyproject's [tool.exportlens] cache_url)",
    )
    parser.add_argument("--cache-write", action="store_true", default=None, help="also upload each new result to the shared cache (default: pyproject's [tool.exportlens] cache_write, else only read it)")


MAX_JOBS = 256  # worker processes for --jobs; each holds torch (hundreds of MB)


def _number(what: str, low: float, high: float, integer: bool) -> Callable[[str], Any]:
    """An argparse type: a number from ``low`` to ``high``. ``nan``, ``inf``, zero and
    negatives are usage errors (exit 2): an infinite timeout let a hanging model run forever."""
    shown = f"{low} to {high}" if integer else f"{low:g} to {high:g}"

    def parse(text: str) -> Any:
        try:
            value: float = int(text) if integer else float(text)
        except ValueError:
            value = math.nan
        if not low <= value <= high:  # false for nan
            raise argparse.ArgumentTypeError(f"expected {what} from {shown}, got {text!r}")
        return value

    return parse


def _lower_formats(text: str) -> tuple[str, ...]:
    """``--lower onnx,executorch``: comma-separated formats; ``none`` lowers nothing (over pyproject's ``lower``)."""
    from exportlens.core.model.lowering import LOWER_FORMATS

    formats = tuple(dict.fromkeys(f.strip() for f in text.split(",") if f.strip()))
    if formats == ("none",):
        return ()
    unknown = [f for f in formats if f not in LOWER_FORMATS]
    if unknown or not formats:
        raise argparse.ArgumentTypeError(f"expected {', '.join(LOWER_FORMATS)} or none, got {text!r}")
    return formats


def _lower_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--lower",
        type=_lower_formats,
        default=None,
        metavar="FORMAT",
        help="after each export, lower the program (comma-separated): onnx converts it, checks it, runs it in onnxruntime and compares with eager (needs exportlens[onnx]); "
        "executorch lowers it to the edge dialect with the XNNPACK delegate, builds the .pte, runs it in ExecuTorch's runtime and compares with eager (needs exportlens[executorch]); "
        "none turns it off (default: pyproject's [tool.exportlens] lower, else none)",
    )
    parser.add_argument(
        "--save-onnx",
        default=None,
        metavar="DIR",
        help="write each target's ONNX model to DIR as <module>.<target>.onnx (implies --lower onnx)",
    )
    parser.add_argument(
        "--save-pte",
        default=None,
        metavar="DIR",
        help="write each target's ExecuTorch program to DIR as <module>.<target>.pte (implies --lower executorch)",
    )
    parser.add_argument(
        "--memory-budget",
        type=_size,
        default=None,
        metavar="SIZE",
        help="the most memory a target's ExecuTorch program may need to run (its memory plan and XNNPACK's workspace at the Dims' maxima), e.g. '512 MB': "
        "more is a lowering/executorch-over-budget error (default: the target's memory_budget, else pyproject's [tool.exportlens] memory_budget, else none)",
    )


def _size(text: str) -> int:
    from exportlens.core.model.lowering import parse_size

    size = parse_size(text.strip() if not text.strip().isdigit() else int(text))
    if size is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size such as '512 MB' or '2 GB'")
    return size


# The flag that saves each format's programs, and the format it implies.
_SAVE_FLAGS = {"onnx": "save_onnx", "executorch": "save_pte"}


def _saves(args: argparse.Namespace) -> dict[str, str]:
    """format -> the folder its programs are saved to."""
    return {f: getattr(args, flag) for f, flag in _SAVE_FLAGS.items() if getattr(args, flag, None)}


def _with_lowering(overrides: Overrides, args: argparse.Namespace) -> Overrides:
    lower, saves = getattr(args, "lower", None), _saves(args)
    if saves:
        lower = tuple(dict.fromkeys((*(lower or ()), *saves)))
    return dataclasses.replace(
        overrides, lower=lower, keep_lowered=tuple(saves), memory_budget=getattr(args, "memory_budget", None)
    )


def _save_programs(results: list[Any], saves: dict[str, str]) -> bool:
    from exportlens.core.model.lowering import TITLES
    from exportlens.lowered_files import save_programs

    for format, folder in saves.items():
        try:
            _, not_made = save_programs(results, folder, format)
        except OSError as e:
            print(f"exportlens: cannot write the {TITLES[format]} programs to {folder}: {e}", file=sys.stderr)
            return False
        for line in not_made:
            print(f"exportlens: {line}", file=sys.stderr)
    return True


_seconds = _number("a number of seconds", *TIMEOUT_RANGE_S, integer=False)
_megabytes = _number("a whole number of MB", *MEMORY_RANGE_MB, integer=True)
_jobs = _number("a whole number of processes", 1, MAX_JOBS, integer=True)


def run(argv: list[str]) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0) if e.code in (0, None) else 2
    if args.command == "version":
        from exportlens import about

        print(about.report())
        return 0
    if args.command in ("check", "snapshot", "show", "cache", "graph"):
        log_to_stderr()  # the server sets up its own logging
    if args.command in ("check", "snapshot", "show"):
        from exportlens.core import torchversion

        unsupported = torchversion.problem()  # from the installed metadata: torch is not imported here
        if unsupported is not None:
            print(f"exportlens {args.command}: {unsupported}", file=sys.stderr)
            return 2
    if args.command in ("check", "snapshot"):
        overrides = Overrides(timeout_s=args.timeout, memory_mb=args.memory_mb, strict=args.strict or None, cache=not args.no_cache, cache_dir=args.cache_dir, cache_url=args.cache_url, cache_write=args.cache_write, weights=args.weights, start_method=args.start_method)
        overrides = _with_lowering(overrides, args)
        paths = args.paths or [project_folder()]
        view = View(quiet=args.quiet, concise=getattr(args, "output_format", "full") == "concise")
        if args.command == "snapshot":
            return _check(paths, fmt="snapshot", pipeline=Pipeline(overrides), jobs=args.jobs, signatures=False, view=view)
        if (args.fix or args.diff) and (args.watch or args.shard):
            print("exportlens check: --fix and --diff check every file once; they cannot be combined with " + ("--watch" if args.watch else "--shard"), file=sys.stderr)
            return 2
        if args.unsafe_fixes and not (args.fix or args.diff):
            print("exportlens check: --unsafe-fixes chooses what --fix or --diff apply; give one of them too", file=sys.stderr)
            return 2
        if args.watch:
            if args.format != "text" or args.shard or args.store_durations:
                print("exportlens check: --watch prints the text report; it cannot be combined with " + (f"--format {args.format}" if args.format != "text" else "--shard or --store-durations"), file=sys.stderr)
                return 2
            return _watch(paths, Pipeline(overrides), args.jobs, signatures=not args.no_signatures, view=view)
        if args.durations and not args.shard:
            print("exportlens check: --durations balances the parts of --shard K/N; give --shard too", file=sys.stderr)
            return 2
        sharding = Sharding(args.shard, args.durations, args.store_durations)
        fixing = Fixing(args.fix, args.diff, args.unsafe_fixes)
        return _check(paths, fmt=args.format, pipeline=Pipeline(overrides), jobs=args.jobs, signatures=not args.no_signatures, view=view, saves=_saves(args), sharding=sharding, fixing=fixing)
    if args.command == "show":
        if not os.path.exists(args.file):
            print(f"exportlens show: {args.file}: no such file or folder", file=sys.stderr)
            return 2
        overrides = Overrides(timeout_s=args.timeout, cache=not args.no_cache, cache_dir=args.cache_dir, cache_url=args.cache_url, cache_write=args.cache_write, weights=args.weights, start_method=args.start_method)
        # A folder: the model files under it, found as ``check`` finds them.
        jobs = 1 if os.path.isfile(args.file) else None
        return _check([args.file], fmt="show", pipeline=Pipeline(overrides), jobs=jobs, signatures=True)
    if args.command == "cache":
        return _cache_command(args.action, args.cache_dir)
    if args.command == "merge":
        return merge_command.run(args, View(quiet=args.quiet, concise=args.output_format == "concise"))
    if args.command == "trust":
        return trust_command.run(args)
    if args.command == "graph":
        return graph_command.run(args)
    from exportlens.server.app import main

    return main(args.tcp, socket_path=args.socket, token_file=args.token_file, allow_remote=args.allow_remote)


def _watch(paths: list[str], pipeline: Pipeline, jobs: int | None, *, signatures: bool, view: View) -> int:
    from exportlens.watch_command import Session, watch

    found = survey(paths)
    for p, why in found.refused:
        print(f"exportlens: {p}: {why}", file=sys.stderr)
    if found.refused:
        return 2

    def render(results: list[FileResult]) -> str:
        return format_text(results, signatures=signatures, concise=view.concise, style=view.style)

    def progress(files: int) -> Progress:
        return Progress(sys.stderr, files)

    shows_progress = wanted(sys.stderr, fmt="text", quiet=view.quiet)
    return watch(Session(paths, pipeline, jobs, render, progress if shows_progress else None), jobs)


def _cache_command(action: str, cli_dir: str | None) -> int:
    # Outside a check there is no model file: the current folder's pyproject decides.
    directory = Pipeline(Overrides(cache_dir=cli_dir)).cache_dir(os.path.join(os.getcwd(), "_"))
    if action == "dir":
        print(directory)
        return 0
    removed = ResultCache(directory).clear()
    print(f"Removed {removed} cached result{'s' * (removed != 1)} from {directory}")
    return 0


def _no_models(paths: list[str]) -> str:
    """What a run that found no model file says: how model files are found, so a user
    whose models declare nothing (yet) learns what to write, instead of a clean bill."""
    where = ", ".join(display_path(os.path.abspath(p)) or "." for p in paths)
    return (
        f"no model file found in {where}: a .py file or notebook is checked when it declares a target "
        "(module globals `model` and `example_args`, `@exportlens.target`) or when "
        '`[tool.exportlens] targets = ["path/file.py:function"]` in pyproject.toml names it '
        "(see docs/contract.md, Declaring targets)"
    )


@dataclasses.dataclass(frozen=True)
class Sharding:
    """``check --shard K/N [--durations FILE]`` and ``--store-durations FILE``."""

    shard: Shard | None = None
    durations: str | None = None
    store: str | None = None


@dataclasses.dataclass(frozen=True)
class Fixing:
    """``check --fix`` / ``--diff`` / ``--unsafe-fixes``."""

    fix: bool = False
    diff: bool = False
    unsafe: bool = False


def _check(
    paths: list[str],
    *,
    fmt: str,
    pipeline: Pipeline,
    jobs: int | None,
    signatures: bool,
    view: View | None = None,
    saves: dict[str, str] | None = None,
    sharding: Sharding | None = None,
    fixing: Fixing | None = None,
) -> int:
    view = view or View()
    fixing = fixing or Fixing()
    sharding = sharding or Sharding()
    found = survey(paths)
    for p, why in found.refused:
        print(f"exportlens: {p}: {why}", file=sys.stderr)
    if found.refused:
        return 2
    if not found.files and not found.declarations:
        print(f"exportlens: {_no_models(paths)}", file=sys.stderr)
    started = time.perf_counter()
    files, plan = found.files, None
    if sharding.shard is not None:
        from exportlens.shard import plan as plan_shard

        try:
            plan = plan_shard(found.files, pipeline, sharding.shard, sharding.durations)
        except DurationsError as e:
            print(f"exportlens check: --durations: {e}", file=sys.stderr)
            return 2
        files = plan.files
    from exportlens.core.isolation.pool import WorkerError  # torch-free, like the rest of the CLI

    try:
        if fmt == "snapshot":
            from exportlens.snapshot_command import record

            return record(paths, found.files, pipeline, jobs, progress=view.progress(fmt, found.files))
        # no files: no workers, an empty batch; a model module: the targets that import it
        with view.progress(fmt, files) as listener:
            batch = run_with_views(pipeline, files, jobs, listener=listener)
    except WorkerError as e:  # no worker process can start: nothing could be checked
        print(f"exportlens: {e}", file=sys.stderr)
        return 2
    results = batch.results
    if saves and not _save_programs(results, saves):
        return 2
    if sharding.store and not _store_durations(sharding.store, results, plan):
        return 2
    if fmt != "show":
        # The snapshot's entries for files under the PATHs that are gone (removed
        # targets), and the pyproject.toml files whose targets name no file: shard 1
        # reports them (they belong to no model file), against every shard's files.
        extra = pipeline.vanished(paths, found.files) + found.declarations if plan is None or plan.shard.index == 1 else []
        results = sorted(without_declared(results, found.declarations) + extra, key=lambda r: r.path)
    verified = None
    if fixing.fix or fixing.diff or fmt == "json":
        from exportlens import fix_command

        verified = fix_command.find(results, pipeline)
        if fixing.fix or fixing.diff:
            changes, applied = fix_command.fixed_texts(fix_command.chosen(verified, unsafe=fixing.unsafe))
            if fixing.diff:
                sys.stdout.write(fix_command.unified_diff(changes, display_path))
                fix_command.say(f"Would fix {applied} diagnostic{'s' * (applied != 1)} (each fix verified: exported again, outputs compared)" if applied else "No verified fixes to apply")
                return 1 if changes else 0
            fix_command.write(changes)
            fix_command.say(f"Fixed {applied} diagnostic{'s' * (applied != 1)} in {len(changes)} file{'s' * (len(changes) != 1)}; checking again")
            again = Fixing()  # what remains: the fixed files exported afresh (their texts changed: no cache hit)
            return _check(paths, fmt=fmt, pipeline=pipeline, jobs=jobs, signatures=signatures, view=view, saves=saves, sharding=sharding, fixing=again)
    elapsed = time.perf_counter() - started
    origins = {p: "store" if p in batch.from_store else "cache" for p in batch.cached}
    shown = None
    if verified is not None:
        from exportlens.fix_command import fix_json

        def shown(d: Diagnostic, path: str) -> list[dict[str, Any]]:
            return [fix_json(o.fix, display_path, path) for o in verified.of(d, path)]

    return print_report(results, fmt=fmt, view=view, signatures=signatures, elapsed=elapsed, cached=batch.hits, plan=plan, origins=origins, fixes=shown)


def _store_durations(path: str, results: list[FileResult], plan: Plan | None) -> bool:
    """``--store-durations FILE``: the export time of each model file checked."""
    from exportlens.shard import store_durations

    try:
        store_durations(path, results, plan.keys if plan is not None else None)
    except DurationsError as e:
        print(f"exportlens check: --store-durations: {e}", file=sys.stderr)
        return False
    return True
