"""``exportlens graph FILE``: the exported graph as Model Explorer's JSON, or as a page
that draws it (a folder any static web server serves), or that page opened in a browser.

The graph comes from the same result ``check`` makes (the cache's, when it holds
one), built without torch by :mod:`exportlens.core.picture.graph`; the page is
:mod:`exportlens.core.picture.page` (Model Explorer's web app from its installed
package, the ``graph`` extra).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import webbrowser

from exportlens.core.model.results import FileResult
from exportlens.core.pipeline import Overrides, Pipeline
from exportlens.core.project.files import root_of
from exportlens.core.project.settings import TIMEOUT_RANGE_S
from exportlens.core.serde.codec import SchemaError

FORMATS = ("json", "html")


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "graph",
        help="the exported graph of FILE as Model Explorer's graph JSON, or a page that draws it",
        description="Exports FILE (or takes its cached result) and writes each target's graph: --format json prints "
        "Model Explorer's graph JSON, with exportlens's source line, signature kind, mutations and diagnostics on every "
        "node; --format html writes a folder (-o, default exportlens-graph/) that shows the picture when any static web "
        "server serves it (a file:// page cannot load its modules); --open serves it on 127.0.0.1 and opens a browser. "
        "The page is Google's Model Explorer (Apache-2.0), from its installed package: pip install 'exportlens[graph]'.",
    )
    p.add_argument("file", metavar="FILE", help="a model file")
    p.add_argument("--target", default=None, metavar="NAME", help="only this target (default: every target of FILE)")
    p.add_argument("--format", choices=FORMATS, default="json", help="json: the graph JSON on stdout (or -o FILE); html: the page's folder")
    p.add_argument("-o", "--output", default=None, metavar="OUT", help="json: the file to write; html: the folder to write (default exportlens-graph)")
    p.add_argument("--open", action="store_true", help="serve the page on 127.0.0.1 and open it in a browser, until Ctrl-C")
    p.add_argument("--timeout", type=_timeout, default=None, metavar="SECONDS", help="per-target limit, as for check")
    p.add_argument("--no-cache", action="store_true", help="export again; neither read nor write the result cache")
    p.add_argument("--cache-dir", default=None, metavar="DIR", help="the result cache's folder, as for check")


def _timeout(text: str) -> float:
    """``--timeout``: seconds within the range ``check`` takes (no 0, negative or nan)."""
    low, high = TIMEOUT_RANGE_S
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not low <= value <= high:
        raise argparse.ArgumentTypeError(f"must be a number of seconds from {low:g} to {high:g}, got {text}")
    return value


def _result(args: argparse.Namespace) -> FileResult | None:
    from exportlens.module_views import run_with_views

    overrides = Overrides(timeout_s=args.timeout, cache=not args.no_cache, cache_dir=args.cache_dir)
    batch = run_with_views(Pipeline(overrides), [os.path.abspath(args.file)], 1)
    want = os.path.realpath(args.file)
    return next((r for r in batch.results if os.path.realpath(r.path) == want), None)


def run(args: argparse.Namespace) -> int:
    from exportlens.core.picture.graph import LEGEND, pictures
    from exportlens.core.picture.page import Page, WebAppMissing, write

    if not os.path.isfile(args.file):
        print(f"exportlens graph: {args.file}: no such file", file=sys.stderr)
        return 2
    if args.open and args.format == "json" and args.output is None:
        args.format = "html"
    from exportlens.core.isolation.pool import WorkerError  # torch-free, like the rest of the CLI

    try:
        result = _result(args)
    except WorkerError as e:  # no worker process can start: nothing could be exported
        print(f"exportlens graph: {e}", file=sys.stderr)
        return 2
    if result is None:
        print(f"exportlens graph: {args.file}: no result", file=sys.stderr)
        return 2
    names = [t.name for t in result.targets]
    if args.target is not None and args.target not in names:
        print(f"exportlens graph: no target {args.target!r} in {args.file} (targets: {', '.join(names) or 'none'})", file=sys.stderr)
        return 2
    try:
        found = pictures(result, root=root_of(os.path.abspath(args.file)), target=args.target)
    except SchemaError as e:
        print(f"exportlens graph: the program cannot be read: {e}", file=sys.stderr)
        return 1
    for t in result.targets:
        if (args.target is None or t.name == args.target) and not t.program:
            print(f"exportlens graph: {t.name}: no graph (the export {'failed' if t.status == 'error' else 'kept none'})", file=sys.stderr)
    if not found:
        for d in result.diagnostics:
            if d.severity == "error":
                print(f"{args.file}:{d.line}: {d.code}: {d.message.splitlines()[0] if d.message else ''}", file=sys.stderr)
        return 1
    if args.format == "json":
        # One graph collection (what Model Explorer's "load JSON" reads), a graph per
        # target; the overlay per target and its legend beside it.
        doc = {
            "label": os.path.basename(args.file),
            "graphs": [{**p.graphs["graphs"][0], "id": p.target} for p in found],
            "exportlens": {"nodeData": {p.target: p.node_data for p in found}, "legend": [list(item) for item in LEGEND]},
        }
        text = json.dumps(doc) + "\n"
        if args.output is None:
            sys.stdout.write(text)
        else:
            with open(args.output, "w", encoding="utf-8") as f:
                f.write(text)
        return 0
    page = Page(found)
    try:
        page.index_html()  # Model Explorer installed?
        if not args.open or args.output is not None:
            folder = args.output or "exportlens-graph"
            count = write(page, folder)
            print(f"exportlens graph: wrote {count} files to {folder} (serve the folder over http: python -m http.server -d {folder})", file=sys.stderr)
    except WebAppMissing as e:
        print(f"exportlens graph: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"exportlens graph: cannot write the page: {e}", file=sys.stderr)
        return 2
    if args.open:
        return _serve(page)
    return 0


def _serve(page: object) -> int:
    from exportlens.core.picture.page import Page
    from exportlens.core.picture.serve import PageServer

    assert isinstance(page, Page)
    server = PageServer().start()
    try:  # Ctrl-C may come as soon as the address is out: it ends the serving, never a traceback
        url = server.add(page)
        print(url, flush=True)
        webbrowser.open(url)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    return 0
