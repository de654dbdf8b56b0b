"""``exportlens merge REPORT.json...``: the JSON reports of ``check --shard K/N`` runs
as the one report a single ``check`` would have printed, in any ``--format``, with its
exit status. Torch-free: nothing is exported.

The reports must make one run: all N shards once each, made from the same sources
(the git commit and the model files' bytes), the same settings and environment, and
the same assignment of files to shards (every runner computes it alone: runners whose
caches knew different export times assign differently, which a committed
``--durations`` file prevents). Anything else is refused with exit status 3 and a
message that says which report differs and how, never merged into a report that
silently lacks or repeats files.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from exportlens.core.model.results import FileResult
from exportlens.output import View, print_report
from exportlens.report import JSON_VERSION

REFUSED = 3  # the reports are not the shards of one run
MAX_REPORT_BYTES = 1024 * 1024 * 1024


class Refused(Exception):
    """The reports do not make one run."""


class Unusable(Exception):
    """A report that cannot be read as a shard's JSON report (a usage error)."""


def add_parser(sub: Any, formats: tuple[str, ...], output_formats: tuple[str, ...]) -> None:
    merge = sub.add_parser(
        "merge",
        help="combine the JSON reports of check --shard K/N runs into the report of one run",
        description="Combine the JSON reports (--format json) of every shard of one check --shard K/N run and print them as one run would have: "
        "exit 0 with no error diagnostic, 1 with one, 2 on a usage error (a report that cannot be read), "
        "3 when the reports are not all the shards of one run (a shard missing or given twice, other sources, settings or assignment). "
        "Run it from the folder the shards ran in: the reports' paths are relative to it.",
    )
    merge.add_argument("reports", nargs="+", metavar="REPORT.json", help="one JSON report per shard (check --shard K/N --format json)")
    merge.add_argument("--format", choices=(*formats, "concise"), default="text", help="as for check; concise: text with --output-format concise")
    merge.add_argument("--output-format", choices=output_formats, default="full", help="as for check")
    merge.add_argument("--no-signatures", action="store_true", help="text format: print diagnostics only")
    merge.add_argument("--quiet", "-q", action="store_true", help="no summary line")
    merge.add_argument("--store-durations", default=None, metavar="FILE", help="write every file's export time to FILE, as check --store-durations does")


def _load(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_REPORT_BYTES + 1)
    except OSError as e:
        raise Unusable(f"{path}: cannot read it: {e.strerror or e}") from e
    if len(data) > MAX_REPORT_BYTES:
        raise Unusable(f"{path}: over {MAX_REPORT_BYTES} bytes")
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeError) as e:
        raise Unusable(f"{path}: not a JSON report ({e})") from e
    if not isinstance(doc, dict) or not isinstance(doc.get("files"), list):
        raise Unusable(f"{path}: not a JSON report of exportlens check")
    if doc.get("version") != JSON_VERSION:
        raise Unusable(f"{path}: report version {doc.get('version')!r}; this exportlens reads version {JSON_VERSION}")
    shard = doc.get("shard")
    if not isinstance(shard, dict):
        raise Unusable(f"{path}: not the report of a shard (check --shard K/N --format json)")
    fields = {"index": int, "count": int, "files": list, "assignment": dict, "sources": str, "settings": str, "results": str}
    for name, kind in fields.items():
        if not isinstance(shard.get(name), kind) or isinstance(shard.get(name), bool):
            raise Unusable(f"{path}: its shard has no valid {name!r}")
    if not isinstance(shard.get("commit"), (str, type(None))):
        raise Unusable(f"{path}: its shard has no valid 'commit'")
    if not all(isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) for k, v in shard["assignment"].items()):
        raise Unusable(f"{path}: its shard's assignment is not file -> shard")
    return doc


def _short(names: list[str], most: int = 5) -> str:
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


def _check_set(reports: list[tuple[str, dict[str, Any]]]) -> None:
    """Refused unless the reports are each shard of one run, once."""
    first_path, first = reports[0][0], reports[0][1]["shard"]
    count = first["count"]
    for path, doc in reports[1:]:
        shard = doc["shard"]
        if shard["count"] != count:
            raise Refused(f"{path} is a shard of {shard['count']}, {first_path} of {count}: the reports are of different runs")
        if shard.get("folder") != first.get("folder"):
            raise Refused(f"{path} was made in the folder {shard.get('folder')!r} of the project, {first_path} in {first.get('folder')!r}: their paths start in different folders; run every shard from the same folder")
        if shard.get("commit") != first.get("commit"):
            raise Refused(f"{path} was made at commit {shard.get('commit') or '(none)'}, {first_path} at {first.get('commit') or '(none)'}: merge the shards of one commit")
        if shard["sources"] != first["sources"]:
            raise Refused(f"{path} and {first_path} checked different model files (a file added, removed or changed between the runs): merge the shards of one checkout")
        if shard["settings"] != first["settings"]:
            raise Refused(f"{path} and {first_path} ran with different settings (timeout, memory, strict, lowering, weights) or a different exportlens, torch or Python")
        if shard["assignment"] != first["assignment"]:
            moved = sorted(k for k in set(shard["assignment"]) | set(first["assignment"]) if shard["assignment"].get(k) != first["assignment"].get(k))
            raise Refused(
                f"{path} and {first_path} assigned the files to shards differently ({_short(moved)}): their runners knew different export times; "
                "give every shard the same --durations FILE (written by check --store-durations)"
            )
    by_index: dict[int, str] = {}
    for path, doc in reports:
        index = doc["shard"]["index"]
        if not 1 <= index <= count:
            raise Unusable(f"{path}: shard {index} of {count}")
        if index in by_index:
            raise Refused(f"{by_index[index]} and {path} are both shard {index}/{count}: give each shard's report once")
        by_index[index] = path
        assigned = sorted(k for k, s in first["assignment"].items() if s == index)
        if sorted(doc["shard"]["files"]) != assigned:
            raise Refused(f"{path} checked other files than shard {index}/{count} is assigned")
    missing = [i for i in range(1, count + 1) if i not in by_index]
    if missing:
        lost = sorted(k for k, s in first["assignment"].items() if s in missing)
        shards = ", ".join(f"{i}/{count}" for i in missing)
        raise Refused(f"shard{'s' * (len(missing) > 1)} {shards} missing: {_short(lost) if lost else 'no files'} would go unchecked")


def merge(paths: list[str], cwd: str | None = None) -> tuple[list[FileResult], float, int, dict[str, str]]:
    """The results of the reports at ``paths``, sorted as one run sorts them; the
    slowest shard's seconds; how many files came from the cache; where each result
    came from ("cache" or "store"; absent: exported)."""
    from exportlens.shard import unpack_results

    reports = [(p, _load(p)) for p in paths]
    _check_set(reports)
    results: list[FileResult] = []
    seen: dict[str, str] = {}
    origins: dict[str, str] = {}
    for path, doc in reports:
        try:
            shard_results = unpack_results(doc["shard"]["results"], cwd)
        except ValueError as e:
            raise Unusable(f"{path}: {e}") from e
        said = doc["shard"].get("origins")
        said = said if isinstance(said, list) and len(said) == len(shard_results) else ["run"] * len(shard_results)
        for r, origin in zip(shard_results, said, strict=True):
            if r.path in seen:
                raise Refused(f"{seen[r.path]} and {path} both report {r.path}")
            seen[r.path] = path
            if origin in ("cache", "store"):
                origins[r.path] = origin
        results += shard_results
    try:
        seconds = max((float(doc["shard"].get("seconds") or 0) for _, doc in reports), default=0.0)
        cached = sum(int(doc["shard"].get("cached") or 0) for _, doc in reports)
    except (TypeError, ValueError) as e:
        raise Unusable(f"a report's shard seconds or cached count is not a number ({e})") from e
    return sorted(results, key=lambda r: r.path), seconds, cached, origins


def run(args: argparse.Namespace, view: View) -> int:
    try:
        results, seconds, cached, origins = merge(args.reports)
    except Unusable as e:
        print(f"exportlens merge: {e}", file=sys.stderr)
        return 2
    except Refused as e:
        print(f"exportlens merge: refused: {e}", file=sys.stderr)
        return REFUSED
    if args.store_durations:
        from exportlens.shard import DurationsError, store_durations

        try:
            store_durations(args.store_durations, [r for r in results if os.path.exists(r.path)])
        except DurationsError as e:
            print(f"exportlens merge: --store-durations: {e}", file=sys.stderr)
            return 2
    if args.format == "concise":
        args.format, view.concise = "text", True
    return print_report(results, fmt=args.format, view=view, signatures=not args.no_signatures, elapsed=seconds, cached=cached, origins=origins)
