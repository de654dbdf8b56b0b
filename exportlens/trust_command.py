"""``exportlens trust [PATH]``, ``--forget [PATH]``, ``--list``: the folders whose code
the language server may run (``exportlens.core.project.trust``). The CLI's own
``check``, ``show`` and ``snapshot`` need no record: running them is the consent."""

from __future__ import annotations

import argparse
import os
import sys

from exportlens.core.project import trust


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "trust",
        help="let the language server run the code of a folder (default: the current one) and its subfolders",
        description="The language server runs the model code of the files it opens, so it runs nothing in a folder "
        "until you trust it here (or with the editor command exportlens.trust). The record is " + str(trust.record_path()) + ".",
    )
    p.add_argument("path", nargs="?", default=None, metavar="PATH", help="the folder to trust (default: the current folder)")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--forget", action="store_true", help="trust PATH no more (and the trusted folders inside it)")
    what.add_argument("--list", action="store_true", help="print the trusted folders, one per line")


def run(args: argparse.Namespace) -> int:
    if args.list:
        if args.path is not None:
            print("exportlens trust: --list takes no PATH", file=sys.stderr)
            return 2
        record = trust.load()
        if record.problem is not None:
            print(record.problem, file=sys.stderr)
            return 1
        for folder in record.folders:
            print(folder)
        return 0
    folder = args.path if args.path is not None else os.getcwd()
    try:
        if args.forget:
            gone = trust.forget(folder)
            for f in gone:
                print(f"exportlens: no longer trusted: {f}")
            if not gone:
                print(f"exportlens: {trust.resolve(folder)} was not trusted")
            still = trust.load().folder_for(folder)
            if still is not None:
                print(f"exportlens: {trust.resolve(folder)} is still trusted as part of {still}; forget that one to stop it", file=sys.stderr)
            return 0
        resolved = trust.trust(folder)
    except trust.TrustError as e:
        print(f"exportlens trust: {e}", file=sys.stderr)
        return 1
    print(f"exportlens: trusted {resolved} (and its subfolders): the language server runs its model code")
    return 0
