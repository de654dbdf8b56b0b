"""What one piece of code could change that other code sees
(``core/isolation/speedups/observable.py``): the rule the worker applies after each preloaded
import, and a job before it reuses the fake-tensor cache. Each case runs in a fork,
which it may change at will."""

from __future__ import annotations

import os
from typing import Callable

import pytest
import torch

from exportlens.core.isolation.speedups import observable
from tests.core.isolation.forks import in_child


def _seen(change: Callable[[], None], own: str | None = None) -> list[str]:
    def work() -> list[str]:
        snapshot = observable.take()
        change()
        return observable.changes(snapshot, own=own)

    return in_child(work)


def _replace_gelu() -> None:
    torch.nn.functional.gelu = torch.nn.functional.silu  # type: ignore[assignment]


def _decompose_mm() -> None:
    from torch._decomp import decomposition_table

    decomposition_table[torch.ops.aten.mm.default] = lambda a, b: a


def _fake_rule() -> None:
    from torch._subclasses import fake_impls

    fake_impls.op_implementations_checks.insert(0, (lambda func: False, lambda *args: None))


def _method() -> None:
    torch.nn.Module.__call__ = lambda self, *args: None  # type: ignore[method-assign]


def _environ() -> None:
    os.environ["EXPORTLENS_TEST_SEEN"] = "1"


def _copyreg_torch() -> None:
    import copyreg

    copyreg.dispatch_table[torch.Tensor] = lambda t: (torch.zeros, (1,))  # type: ignore[index]


def _finder_first() -> None:
    import sys

    class Finder:
        def find_spec(self, *args: object) -> None:
            return None

    sys.meta_path.insert(0, Finder())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (_replace_gelu, "torch.nn.functional.gelu replaced"),
        (_decompose_mm, "torch._decomp.decomposition_table: <OpOverload(op='aten.mm', overload='default')> registered"),
        (_fake_rule, "torch._subclasses.fake_impls.op_implementations_checks"),
        (_method, "torch.nn.modules.module.Module.__call__ replaced"),
        (_environ, "os.environ (EXPORTLENS_TEST_SEEN)"),
        (_copyreg_torch, "copyreg.dispatch_table"),
        (_finder_first, "sys.meta_path: entries replaced or inserted"),
    ],
)
def test_what_other_code_would_see_is_said(change: Callable[[], None], said: str) -> None:
    found = _seen(change)
    assert any(said in line for line in found), found


def _new_names_and_own_registrations() -> None:
    """What a well-behaved library does at import: new names, its own classes in
    torch's registries, its own operator namespace, a cache filled."""
    import re
    import sys
    import types

    import torch.utils._pytree as pytree

    module = types.ModuleType("ownlib_for_test")
    sys.modules["ownlib_for_test"] = module
    exec(  # noqa: S102 - a module defined in the test, as a library's file would be
        "class Pair:\n    def __init__(self, a, b):\n        self.a, self.b = a, b\n",
        module.__dict__,
    )
    pytree.register_pytree_node(module.Pair, lambda p: ([p.a, p.b], None), lambda xs, _: module.Pair(*xs))
    torch.nn.Module.ownlib_helper = lambda self: None  # type: ignore[attr-defined]
    torch.library.define("ownlib_for_test::twice", "(Tensor x) -> Tensor")
    re.compile("ownlib[0-9]+")
    sys.meta_path.append(type("LastFinder", (), {"find_spec": staticmethod(lambda *a: None)})())


def test_new_names_and_a_librarys_own_registrations_are_not_said() -> None:
    assert _seen(_new_names_and_own_registrations) == []


def test_a_library_may_change_its_own_modules() -> None:
    import json.decoder

    def own() -> None:
        json.decoder.scanstring = json.decoder.py_scanstring  # type: ignore[assignment]

    assert _seen(own, own="json") == []
    assert _seen(own) == ["json.decoder.scanstring replaced"]


def test_a_snapshot_of_named_modules_sees_only_them() -> None:
    def work() -> tuple[list[str], list[str]]:
        snapshot = observable.take(["torch._decomp"], environ=False)
        _replace_gelu()
        _environ()
        unseen = observable.changes(snapshot, rebase=False)
        _decompose_mm()
        return unseen, observable.changes(snapshot, rebase=False)

    unseen, seen = in_child(work)
    assert unseen == []
    assert seen and "decomposition_table" in seen[0]


def test_after_a_clean_check_the_next_import_is_compared_with_what_it_found() -> None:
    def work() -> tuple[list[str], list[str]]:
        snapshot = observable.take()
        torch.nn.Module.ownlib_helper = lambda self: None  # type: ignore[attr-defined]
        first = observable.changes(snapshot)
        torch.nn.Module.ownlib_helper = lambda self: 1  # type: ignore[attr-defined]
        return first, observable.changes(snapshot)

    first, second = in_child(work)
    assert first == []  # a new name
    assert second == ["torch.nn.modules.module.Module.ownlib_helper replaced"]  # then replaced
