"""What a CLI run prints: the view of the text report (``--quiet``,
``--output-format``, colour, the progress line with the library's warnings written
above it) and the report itself in each format (``check``, ``show``, ``merge``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
from typing import Any, Callable, Iterator

from exportlens import __version__
from exportlens.core.model.results import Diagnostic, FileResult
from exportlens.formats import github, sarif
from exportlens.progress import LogHandler, Progress, wanted
from exportlens.report import display_path, format_text, summary, to_json
from exportlens.shard import Plan
from exportlens.terminal import Style, wants_colour

_LOG = LogHandler(sys.stderr)


def log_to_stderr() -> None:
    """Warnings of the library (an unreadable cache entry...) as ``exportlens: ...``
    lines, above the progress line when one is shown."""
    logger = logging.getLogger("exportlens")
    if not logger.handlers:
        _LOG.stream = sys.stderr
        _LOG.setFormatter(logging.Formatter("exportlens: %(message)s"))
        logger.addHandler(_LOG)
        logger.setLevel(logging.WARNING)


class View:
    """How the text report looks: ``--quiet``, ``--output-format``, colour and progress."""

    def __init__(self, *, quiet: bool = False, concise: bool = False) -> None:
        self.quiet = quiet
        self.concise = concise
        self.style = Style(wants_colour(sys.stdout))

    def progress(self, fmt: str, files: list[str]) -> contextlib.AbstractContextManager[Progress | None]:
        """The progress line of a run over ``files`` on a terminal's stderr, else nothing."""
        if not wanted(sys.stderr, fmt=fmt, quiet=self.quiet) or not files:
            return contextlib.nullcontext()
        return _shown(Progress(sys.stderr, len(files), {f: display_path(f) for f in files}))


@contextlib.contextmanager
def _shown(progress: Progress) -> Iterator[Progress]:
    """The progress line up for the run, warnings written above it."""
    with progress:
        _LOG.progress = progress
        try:
            yield progress
        finally:
            _LOG.progress = None


def print_report(
    results: list[FileResult],
    *,
    fmt: str,
    view: View,
    signatures: bool,
    elapsed: float,
    cached: int,
    plan: Plan | None = None,
    origins: dict[str, str] | None = None,
    fixes: Callable[[Diagnostic, str], list[dict[str, Any]]] | None = None,
) -> int:
    """``results`` in ``fmt`` on stdout (a shard's with what ``merge`` needs); the exit
    status. ``origins``: the path of each result that came from the cache ("cache") or
    the shared store ("store")."""
    origins = origins or {}
    line = summary(results, elapsed, cached=cached, from_store=sum(o == "store" for o in origins.values()))
    if plan is not None:
        line += f" [shard {plan.shard}: {len(plan.files)} of {len(plan.keys)} model files]"
    if fmt == "json":
        doc = to_json(results, origins=origins, fixes=fixes)
        if plan is not None:
            from exportlens.shard import pack_results

            doc["shard"] = {
                **plan.block,
                "seconds": round(elapsed, 3),
                "cached": cached,
                "results": pack_results(results),
                "origins": [origins.get(r.path, "run") for r in results],
            }
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    elif fmt == "sarif":
        log = sarif.to_sarif(results, __version__)
        if plan is not None:  # uploaded one by one, each shard is its own code-scanning category
            log["runs"][0]["automationDetails"] = {"id": f"exportlens/shard-{plan.shard.index}-of-{plan.shard.count}/"}
        sys.stdout.write(json.dumps(log, indent=2) + "\n")
    elif fmt == "github":
        for annotation in github.annotations(results):
            print(annotation)
        print(line)
    else:
        text = format_text(results, signatures=signatures, concise=view.concise, style=view.style)
        if text:
            print(text)
        if fmt != "show" and not view.quiet:
            print(("\n" if text else "") + line)
    sys.stdout.flush()
    return 1 if any(r.has_errors for r in results) else 0
