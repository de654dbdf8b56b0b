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
    # Every other file of the app is served as it is (the stylesheets and the main
    # bundle aside, below).
    polyfills = next(name for name in os.listdir(app) if name.startswith("polyfills-") and name.endswith(".js"))
    with open(os.path.join(app, polyfills), "rb") as f:
        assert app_file(polyfills) == f.read()


def test_the_main_bundle_is_served_with_its_animations_switchable() -> None:
    """Each of Model Explorer's animations that test mode skips is skipped too when the
    page sets ``window.__exportlensStill`` (the address's ``animations=0``); nothing
    else of the bundle changes (test mode's other effects, on saved settings and page
    sizes, stay off)."""
    from exportlens.core.picture.page import _STILL_FIXES, app_file, still_fixed, web_app

    app = web_app()
    [main] = [name for name in os.listdir(app) if re.fullmatch(r"main-[A-Za-z0-9]+\.js", name)]
    with open(os.path.join(app, main), encoding="utf-8") as f:
        original = f.read()
    expected = original
    for old, new, count in _STILL_FIXES:
        assert original.count(old) == count, old
        expected = expected.replace(old, new)
    served = app_file(main)
    assert served is not None and served.decode() == expected
    assert served.decode().count("window.__exportlensStill") == 5
    # A bundle where one of them no longer matches is served as it is.
    changed = original.replace(_STILL_FIXES[2][0], "shakeNode(e){").encode()
    assert still_fixed(changed) == changed
