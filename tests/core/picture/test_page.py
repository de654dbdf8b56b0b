"""The page's one fix to Model Explorer's layout worker applies to the pinned wheel.

Model Explorer 0.1.34 lays out the layers inside its artificial layers ("sections")
of a top-level layer without their edges (``exportlens.core.picture.page._SECTION_FIX``);
the page serves the worker with that fixed. A Model Explorer whose worker no longer
has that code must fail here, not silently draw the rows again.
"""

from __future__ import annotations

import os
import re

import pytest

pytest.importorskip("model_explorer")


def test_the_layout_worker_is_served_with_the_section_fix() -> None:
    from exportlens.core.picture.page import _SECTION_FIX, app_file, web_app

    app = web_app()
    [worker] = [name for name in os.listdir(app) if re.fullmatch(r"worker-[A-Za-z0-9]+\.js", name)]
    with open(os.path.join(app, worker), encoding="utf-8") as f:
        original = f.read()
    bug, fix = _SECTION_FIX
    assert original.count(bug) == 1
    served = app_file(worker)
    assert served is not None
    assert served.decode() == original.replace(bug, fix)
    # Every other file of the app is served as it is (the stylesheets aside).
    main = next(name for name in os.listdir(app) if name.startswith("main-") and name.endswith(".js"))
    with open(os.path.join(app, main), "rb") as f:
        assert app_file(main) == f.read()
