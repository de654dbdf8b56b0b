"""What one piece of code could change that other code in the same process sees.

The worker imports libraries once (``preload``) and every later job forks from it,
including the jobs of files that never import them. A library whose import leaves
something behind that code which does not use it can see -- torch's functions
replaced (``torch.nn.functional.gelu = silu``, as speed-up libraries patch torch or
transformers), a decomposition or fake-tensor rule for one of torch's operators, a
class's method, ``os.environ`` -- would change those files' results. So the worker
takes an ``ObservedState`` before an import and asks ``changes`` after it.

What counts, in every module loaded before (torch's, the standard library's, the
libraries already preloaded) and every class they define:

- an attribute replaced or removed (a monkeypatch);
- in a module-level dict, set or list (torch's registries: decomposition and meta
  tables, ``torch.library``'s registrations, pytree's nodes, fake-tensor rules; the
  standard library's ``copyreg.dispatch_table``): an entry replaced or removed, or a
  new one that reaches what existed before -- an operator of a namespace that
  existed (``aten``, ``prims``; also as ``"aten/mm/Meta"``), a class or function
  defined before -- unless torch's own code is what was registered (importing one of
  torch's modules registers its own rules, as in any program that imports it); in
  torch's modules also a new list item that is neither plain data nor torch's;
  an item inserted before existing ones (``sys.meta_path`` gaining a finder that
  would see imports first);
- ``os.environ``.

Not counted: new names (a new module attribute or method is seen only by code that
asks for it by that name, i.e. code written for the library), entries keyed by what
the import itself defined (its classes in pytree, its own operator namespaces), the
interpreter's caches (``_CACHES``), and warning filters (they change what is printed,
never a result). Kernels a C++ extension registers with the dispatcher directly are
not seen here.

What a snapshot and its comparison cost: docs/decisions/0005-preloading.md.
"""

from __future__ import annotations

import collections
import os
import re
import sys
import types
from dataclasses import dataclass, field
from typing import Any, Iterable

# Module-level containers that are caches or bookkeeping of the interpreter: they
# grow with every import and hold nothing another program's result depends on (and
# any whose name ends in "cache", as ``regex._main._cache`` does).
_CACHES = frozenset(
    {
        ("sys", "modules"),  # new modules; a replaced entry is still caught by its module's attributes
        ("sys", "path_importer_cache"),
        ("re", "_cache"),
        ("re", "_cache2"),
        ("linecache", "cache"),
        ("encodings", "_cache"),
        ("inspect", "modulesbyfile"),
        ("inspect", "_filesbymodname"),
        ("ctypes", "_c_functype_cache"),
        ("warnings", "filters"),
        ("_warnings", "filters"),
        ("logging", "_handlerList"),
        ("logging", "_handlers"),
        ("threading", "_threading_atexits"),
        ("torch.jit._builtins", "_builtin_table"),  # keyed by id(function): a lookup table of builtins
        ("torch._dynamo.backends.registry", "_BACKENDS"),
        ("torch._dynamo.backends.registry", "_COMPILER_FNS"),
    }
)
# Entries that hold the last of many registrations, not a rule: pytree files each
# class registered without a name under one sentinel name.
_IGNORED = frozenset({("torch.utils._pytree", "SERIALIZED_TYPE_TO_PYTHON_TYPE", "NO_SERIALIZED_TYPE_NAME_FOUND")})
_MAIN = frozenset({"__main__", "__mp_main__"})  # the worker's own script
_CLASS_BOOKKEEPING = frozenset({"__abstractmethods__", "_abc_impl", "__doc__", "__subclasshook__"})
_PLAIN = (str, bytes, int, float, bool, type(None))
_CONTAINERS = (dict, set, list, collections.defaultdict, collections.OrderedDict)
MAX_REASONS = 3


@dataclass
class ObservedState:
    """The loaded modules' namespaces, the dicts of the classes they define and their
    module-level containers, shallow copies held with their objects (so an id is never
    reused while compared), and ``os.environ``."""

    modules: dict[str, tuple[types.ModuleType, dict[str, Any]]] = field(default_factory=dict)
    classes: dict[int, tuple[type, dict[str, Any]]] = field(default_factory=dict)
    containers: dict[tuple[str, str], tuple[Any, Any]] = field(default_factory=dict)
    environ: dict[str, str] | None = None  # None: not compared
    everything: bool = True  # of every loaded module (else of the named ones only)
    namespaces: frozenset[str] = frozenset()  # torch.ops namespaces that existed
    hops: frozenset[int] = frozenset()  # ids of the higher-order operators that existed


def take(names: Iterable[str] | None = None, environ: bool = True) -> ObservedState:
    """A snapshot of the modules named (all of ``sys.modules`` when None), and of
    ``os.environ`` unless told not to."""
    snapshot = ObservedState(environ=dict(os.environ) if environ else None, everything=names is None)
    _add(snapshot, list(sys.modules) if names is None else names)
    ops = sys.modules.get("torch._ops")
    torch_ops = getattr(ops, "ops", None)
    if torch_ops is not None:
        snapshot.namespaces = frozenset(k for k in vars(torch_ops) if not k.startswith("__"))
    hops = getattr(ops, "_higher_order_ops", None)
    if isinstance(hops, dict):
        snapshot.hops = frozenset(id(h) for h in hops.values())
    return snapshot


def _add(snapshot: ObservedState, names: Iterable[str]) -> None:
    for name in names:
        if name == "exportlens" or name.startswith("exportlens."):
            continue  # the worker's own state, which it changes itself between imports
        module = sys.modules.get(name)
        if not isinstance(module, types.ModuleType):
            continue
        try:
            namespace = dict(vars(module))
        except TypeError:
            continue
        snapshot.modules[name] = (module, namespace)
        for attribute, value in namespace.items():
            if attribute == "__warningregistry__":
                continue
            if type(value) in _CONTAINERS:  # never a library's own mapping: reading one may import
                if (name, attribute) not in _CACHES and not attribute.lower().endswith("cache"):
                    kind = set if isinstance(value, set) else list if isinstance(value, list) else dict
                    snapshot.containers[(name, attribute)] = (value, kind(value))
            elif isinstance(value, type) and _defined_in(value, name) and id(value) not in snapshot.classes:
                try:
                    snapshot.classes[id(value)] = (value, dict(vars(value)))
                except TypeError:
                    pass


def _defined_in(value: Any, module: str) -> bool:
    try:
        return value.__module__ == module
    except Exception:  # noqa: BLE001 - a lazy object whose attribute access raises
        return False


def changes(snapshot: ObservedState, rebase: bool = True, own: str | None = None) -> list[str]:
    """What changed since ``snapshot`` that other code could see (see the module's
    text), in words; empty when nothing did. Then, with ``rebase``, the snapshot takes
    in what changed (what may change, and the modules loaded since), so the next
    import is compared with the state it found. ``own``: the library being imported,
    whose own modules are its business (a lazy package replaces itself in
    ``sys.modules``; a submodule fills its package's tables)."""
    found: list[str] = []

    def mine(module: str) -> bool:
        return own is not None and (module == own or module.startswith(own + "."))

    stale_modules: list[str] = []
    stale_classes: list[int] = []
    stale_containers: list[tuple[str, str]] = []

    def note(what: str) -> bool:
        found.append(what)
        return len(found) >= MAX_REASONS

    for name, (module, before) in snapshot.modules.items():
        if name in _MAIN:
            continue
        if mine(name):
            stale_modules.append(name)
            continue
        if name in sys.modules and sys.modules[name] is not module:
            if note(f"sys.modules[{name!r}] replaced"):
                return found
            continue
        now = getattr(module, "__dict__", None)
        if now is None:
            continue
        if len(now) != len(before):
            stale_modules.append(name)
        for attribute, value in before.items():
            if attribute not in now:
                if note(f"{name}.{attribute} removed"):
                    return found
            elif now[attribute] is not value:
                stale_modules.append(name)
                if not _may_replace(snapshot, name, attribute, value, now[attribute]) and note(f"{name}.{attribute} replaced"):
                    return found
    for key, (cls, before) in snapshot.classes.items():
        if mine(getattr(cls, "__module__", "") or ""):
            stale_classes.append(key)
            continue
        now = vars(cls)
        if len(now) != len(before):
            stale_classes.append(key)
        for attribute, value in before.items():
            if attribute in _CLASS_BOOKKEEPING:
                continue
            if attribute not in now:
                if note(f"{cls.__module__}.{cls.__qualname__}.{attribute} removed"):
                    return found
            elif now[attribute] is not value and not _counter(cls.__module__, value, now[attribute]):
                if note(f"{cls.__module__}.{cls.__qualname__}.{attribute} replaced"):
                    return found
    for place, (container, copy) in snapshot.containers.items():
        if mine(place[0]):
            stale_containers.append(place)
            continue
        why = _container_change(snapshot, place, container, copy)
        if why is not None:
            if note(f"{place[0]}.{place[1]}: {why}"):
                return found
        elif len(container) != len(copy) or (isinstance(copy, dict) and any(container[k] is not v for k, v in copy.items())):
            stale_containers.append(place)
    if snapshot.environ is not None and dict(os.environ) != snapshot.environ:
        keys = sorted(k for k in set(os.environ) | set(snapshot.environ) if os.environ.get(k) != snapshot.environ.get(k))
        note(f"os.environ ({', '.join(keys[:5])})")
    if rebase and not found:
        for place in stale_containers:
            container, copy = snapshot.containers[place]
            snapshot.containers[place] = (container, type(copy)(container))
        for key in stale_classes:
            cls = snapshot.classes[key][0]
            snapshot.classes[key] = (cls, dict(vars(cls)))
        new = [n for n in list(sys.modules) if n not in snapshot.modules] if snapshot.everything else []
        _add(snapshot, [*dict.fromkeys(stale_modules), *new])
        if snapshot.environ is not None:
            snapshot.environ = dict(os.environ)
    return found


def _may_replace(snapshot: ObservedState, module: str, attribute: str, before: Any, now: Any) -> bool:
    """A module attribute replaced in a way no other code can tell: a container by one
    that only adds what may be added (torch's ``add_safe_globals`` rebuilds its set),
    a global set once from None (``tempfile.tempdir``, a torch module's lazily made
    helper), a private flag of torch's (``_registered``) or one of its counters
    (``DESCRIBER_NEXT_ID``)."""
    if attribute == "__warningregistry__":
        return True
    held = snapshot.containers.get((module, attribute))
    if held is not None and isinstance(now, type(held[1])):
        return _container_change(snapshot, (module, attribute), now, held[1]) is None
    if before is None:  # set once, lazily: a private helper (``tempfile._name_sequence``), or data
        return attribute.startswith("_") or _plain_or_torch(now)
    torch_module = module == "torch" or module.startswith("torch.")
    if torch_module and type(before) is int and type(now) is int:
        return attribute.startswith("_") or attribute.isupper()  # a counter (``DESCRIBER_NEXT_ID``)
    return torch_module and attribute.startswith("_") and isinstance(before, bool) and isinstance(now, bool)


def _counter(module: str, before: Any, now: Any) -> bool:
    """An int of torch's that counts (``FakeTensorMode.cache_hits``)."""
    return (module == "torch" or module.startswith("torch.")) and type(before) is int and type(now) is int


def _container_change(snapshot: ObservedState, place: tuple[str, str], now: Any, before: Any) -> str | None:
    module = place[0]
    torch_registry = module == "torch" or module.startswith("torch.")
    if isinstance(before, dict):
        for key, value in before.items():
            if isinstance(key, str) and (*place, key) in _IGNORED:
                continue
            if key not in now:
                return f"{_short(key)} removed"
            if now[key] is not value and not (isinstance(value, _PLAIN) and now[key] == value):
                return f"{_short(key)} replaced"
        if len(now) != len(before):
            for key in now.keys() - before.keys():
                if _reaches_old(snapshot, key) and not _torch_owned(now[key]):
                    return f"{_short(key)} registered"
        return None
    if isinstance(before, set):
        if not before <= now:
            return "entries removed"
        for item in now - before:
            if _reaches_old(snapshot, item) and not _torch_owned(item):
                return f"{_short(item)} added"
        return None
    if isinstance(before, list):
        if len(now) < len(before):
            return "entries removed"
        if any(a is not b for a, b in zip(before, now, strict=False)):  # now is at least as long
            return "entries replaced or inserted"
        if torch_registry:
            for item in now[len(before) :]:
                if not _plain_or_torch(item):
                    return f"{_short(item)} appended"
    return None


def _reaches_old(snapshot: ObservedState, obj: Any) -> bool:
    """Whether ``obj`` is something that existed before: an operator of a namespace
    that existed (or a string naming one), a class or function of a module loaded
    before, a higher-order operator that existed."""
    if isinstance(obj, str):
        match = re.match(r"([A-Za-z_][A-Za-z0-9_]*)(::|/)", obj)
        return match is not None and match.group(1) in snapshot.namespaces
    if isinstance(obj, tuple):  # a composite key: only an operator in it says it is a rule
        return any(_reaches_old(snapshot, item) for item in obj if isinstance(item, str) or type(item).__module__ == "torch._ops")
    if isinstance(obj, _PLAIN):
        return False
    if id(obj) in snapshot.hops:
        return True
    namespace = getattr(obj, "namespace", None)
    if isinstance(namespace, str) and type(obj).__module__ == "torch._ops":
        return namespace in snapshot.namespaces
    if isinstance(obj, (type, types.FunctionType, types.BuiltinFunctionType)):
        owner = getattr(obj, "__module__", None)
        return isinstance(owner, str) and owner in snapshot.modules
    return False


def _owner(obj: Any) -> str:
    if isinstance(obj, types.ModuleType):
        return obj.__name__
    owner = None
    if callable(obj):  # a function, a class, or a wrapper that keeps its function's module
        try:
            owner = getattr(obj, "__module__", None)
        except Exception:  # noqa: BLE001 - a proxy whose attribute access raises
            owner = None
    if not isinstance(owner, str):
        owner = type(obj).__module__
    return owner if isinstance(owner, str) else ""


def _torch_owned(obj: Any) -> bool:
    owner = _owner(obj)
    return owner == "torch" or owner.startswith("torch.")


def _plain_or_torch(item: Any) -> bool:
    if isinstance(item, _PLAIN):
        return True
    if isinstance(item, tuple):
        return all(_plain_or_torch(i) for i in item)
    return _torch_owned(item)


def _short(obj: Any) -> str:
    text = repr(obj)
    return text if len(text) <= 80 else text[:77] + "..."
