"""``python -m exportlens`` and the ``exportlens`` console script.

``python -m`` puts the working directory first on ``sys.path``; the package's
``__init__`` has already taken it off again (``exportlens.safe_path``) before this
module runs, because Python imports the package, and the standard library with it,
first: a ``tokenize.py`` in the folder would be imported by then.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    from exportlens.cli import run

    return run(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())
