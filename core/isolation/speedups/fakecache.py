"""The fake-tensor dispatch cache of later jobs, filled by the worker itself.

Why: tracing runs every operator on fake tensors, and ``FakeTensorMode`` keeps, for
the whole process, the output metadata of each operator call it has seen (op,
input dtypes/shapes/strides, default dtype and device, shape-env settings ->
output metadata). In torch's own warm re-run that cache is full from the previous
run; a job forked from the zygote starts with what the zygote holds, and computed
every operator's meta again.

Questions, not answers. A job runs model code, which may change torch's fake-tensor
rules for its own export (a meta function, a decomposition, an entry of
``fake_impls``): what it computed holds for that job alone. So a job sends only the
*questions* it asked -- which operator it called, on tensors of which metadata, with
which other arguments, under which defaults (``Questions``) -- as plain msgpack data,
never objects; and the zygote, which runs no model code, asks each question again
itself while idle (``Answers``) in its own state, where the cache records torch's
answer. A later job that asks the same question finds it, as torch's warm re-run does.
Nothing a job sends can call anything in the worker: the reader builds operators by
name (``aten``/``prims`` only), tensors as fake tensors of the given metadata, and
plain values; anything else drops the question.

And the other way: a job whose own code changed the fake-tensor rules (``guard``,
before each export) must not reuse what the zygote computed under torch's: it empties
its cache, as a fresh process of torch that runs that file starts with none.
``guard`` compares the modules that decide fake results (``RULE_MODULES``: their
attributes, classes and registries, ``observable``) and the Python kernels of the
cached operators with the zygote's.

Up to ``MAX_ENTRIES`` entries are kept in the zygote (about 1 kB each), and
``MAX_QUESTIONS`` per job. Off with ``EXPORTLENS_FAKE_CACHE=0``.

Measured, and when to revisit it: docs/decisions/0004-fake-tensor-answers.md.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import gc
import logging
import time
from typing import Any, Callable, Iterator

import msgpack

from exportlens.core.isolation.hooks import Lessons, SpeedUp, Worker
from exportlens.core.isolation.speedups import observable, switches
from exportlens.core.trace import mark

STATE = switches.decide("EXPORTLENS_FAKE_CACHE", gains="the fake-tensor calls jobs made are answered in the worker, for later jobs to inherit")
ENABLED = STATE.on
MAX_ENTRIES = 20_000
MAX_QUESTIONS = 20_000  # of one job; and waiting in the zygote
MAX_BYTES = 64 << 20  # of one job's questions
MAX_DIMS = 16
MAX_DEPTH = 4
# A standby forked before the zygote answered lacks the entries. Computing a few
# again costs less than a save waiting for a new standby's fork and pages: an edit
# that changes a constant adds one or two; a new model, hundreds (docs/decisions/0002-standby-job.md).
WORTH_A_NEW_STANDBY = 64
NAMESPACES = ("aten", "prims")
# The zygote answers before it takes the next request; once this long is spent, a
# request that waits goes first (a new model's few hundred questions take less,
# once), and the rest waits for an idle moment.
ANSWER_BEFORE_NEXT_S = 0.5
# What decides an operator call's fake result besides its inputs.
RULE_MODULES = (
    "torch._subclasses.fake_tensor",
    "torch._subclasses.fake_impls",
    "torch._subclasses.fake_utils",
    "torch._subclasses.meta_utils",
    "torch._meta_registrations",
    "torch._decomp",
    "torch._decomp.decompositions",
    "torch._refs",
    "torch._prims",
    "torch._prims_common",
    "torch._ops",
    "torch.library",
    "torch._library.simple_registry",
    "torch._library.fake_impl",
    "torch._library.custom_ops",
    "torch._higher_order_ops.effects",
    "torch.fx.experimental.symbolic_shapes",
)

# -- in every process: the recording hook --------------------------------------------

_questions: list[Any] | None = None  # this job's questions while it records; None otherwise
_original: Any = None
_rules: observable.ObservedState | None = None  # the zygote's rules, inherited by its jobs
_kernels: dict[Any, dict[Any, Any]] = {}  # cached operator -> its Python kernels, in the zygote
_own_rules = False  # this job changed the rules: it computes everything itself


def install() -> None:
    """In the zygote, once torch is imported: the hook through which a job notes its
    questions (inert until ``record``), and the rules jobs are compared with."""
    global _original, ENABLED, STATE
    from exportlens.core import torchcompat
    from exportlens.core.torchcompat import FakeTensorMode

    off = torchcompat.lacks("fake-answers")
    if off is not None:  # a torch without the hook or the cache: every job computes its own
        ENABLED = False
        STATE = switches.State(False, f"off: {off}")
        logging.getLogger(__name__).warning("exportlens: %s; each job computes its own fake-tensor answers", off)
        return
    if _original is None:
        _original = FakeTensorMode._cached_dispatch_impl
        FakeTensorMode._cached_dispatch_impl = _recorded  # type: ignore[method-assign]
    settle()


def settle() -> None:
    """What the zygote's rules are now (after its warm-up, its preloads, its answers):
    what a job's are compared with before it exports."""
    global _rules, _kernels
    import sys

    if _original is None:
        return  # not installed (``install``): no rules to compare with

    from exportlens.core.torchcompat import FakeTensorMode

    _rules = observable.take([m for m in RULE_MODULES if m in sys.modules], environ=False)
    ops = {key.key[0] for key in FakeTensorMode.cache if key.key}
    _kernels = {op: dict(op.py_kernels) for op in ops if hasattr(op, "py_kernels")}


def record() -> None:
    """In a job, before the model's code runs: note the questions asked from now on,
    and ``guard`` each export (``torch.export.export`` and ``draft_export``, as the
    job's own code and the model's reach them)."""
    global _questions
    import functools

    import torch.export

    _questions = [] if ENABLED else None
    for name in ("export", "draft_export"):
        original = getattr(torch.export, name)

        @functools.wraps(original)
        def guarded(*args: Any, __original: Any = original, **kwargs: Any) -> Any:
            guard()
            return __original(*args, **kwargs)

        setattr(torch.export, name, guarded)


def _recorded(self: Any, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
    questions = _questions
    if questions is None:
        return _original(self, func, types, args, kwargs)
    from exportlens.core.torchcompat import FakeTensorMode

    cache = FakeTensorMode.cache
    before = len(cache)
    output = _original(self, func, types, args, kwargs)
    if len(cache) > before and len(questions) < MAX_QUESTIONS:
        question = _question(func, args, kwargs, next(reversed(cache)))
        if question is not None:
            questions.append(question)
    return output


def guard() -> None:
    """In a job, before each export: when the job's code changed what decides fake
    results, empty the cache it inherited (a fresh process has none) and stop noting
    questions (their answers here would not be the zygote's anyway)."""
    global _own_rules, _questions
    if _rules is None or _own_rules:
        return
    if not _rules_changed():
        return
    from exportlens.core.torchcompat import FakeTensorMode

    FakeTensorMode.cache.clear()
    _own_rules, _questions = True, None


def _rules_changed() -> bool:
    assert _rules is not None
    if observable.changes(_rules, rebase=False):
        return True
    for op, kernels in _kernels.items():
        now = op.py_kernels
        if len(now) != len(kernels) or any(now.get(k) is not v for k, v in kernels.items()):
            return True
    return False


def questions() -> bytes:
    """This job's questions as bytes; empty when there are none to send."""
    if not _questions:
        return b""
    data: bytes = msgpack.packb(_questions, use_bin_type=True)
    return data if len(data) <= MAX_BYTES else b""


# -- in a job: a question from a call --------------------------------------------------


class _Skip(Exception):
    pass


def _question(func: Any, args: Any, kwargs: Any, key: Any) -> list[Any] | None:
    """``[namespace, operator, overload, defaults, args, kwargs]`` in plain data, or None when
    the call is not one to carry (another namespace, a value with no plain form)."""
    import torch

    from exportlens.core.torchcompat import FakeTensor, OpOverload, pytree

    if not isinstance(func, OpOverload) or not _carried(func):
        return None
    state = key.key
    if len(state) < 6 or state[0] is not func:
        return None
    if not _constructor(func) and not any(isinstance(a, FakeTensor) for a in pytree.tree_leaves((args, kwargs))):
        return None  # not one the zygote answers (``Answers._ask``)
    dtype, device, inference, settings = state[1], state[2], state[3], state[4]
    try:
        if not isinstance(dtype, torch.dtype) or not isinstance(device, str) or not isinstance(inference, bool):
            raise _Skip
        plain_settings = None if settings is None else dataclasses.asdict(settings)
        if plain_settings is not None and not all(type(v) in (bool, int) for v in plain_settings.values()):
            raise _Skip
        return [
            func.namespace,
            func._opname,
            func._overloadname,
            [str(dtype).removeprefix("torch."), device, inference, plain_settings],
            _describe(tuple(args), 0),
            _describe(dict(kwargs), 0),
        ]
    except _Skip:
        return None


def _describe(value: Any, depth: int) -> list[Any]:
    import torch

    from exportlens.core.torchcompat import FakeTensor

    if depth > MAX_DEPTH:
        raise _Skip
    if isinstance(value, FakeTensor):
        if value.layout != torch.strided or value.is_conj() or value.is_neg() or value.is_quantized or value.constant is not None:
            raise _Skip
        shape, stride = value.shape, value.stride()
        if not all(type(n) is int for n in (*shape, *stride, value.storage_offset())):
            raise _Skip
        return [
            "t",
            str(value.dtype).removeprefix("torch."),
            list(shape),
            list(stride),
            value.storage_offset(),
            value.untyped_storage().nbytes(),
            str(value.device),
            value.requires_grad,
            value.is_inference(),
        ]
    if isinstance(value, torch.Tensor):
        raise _Skip
    if type(value) is bool:
        return ["b", value]
    if type(value) is int:
        return ["i", value]
    if type(value) is float:
        return ["f", value]
    if type(value) is str:
        return ["s", value]
    if value is None:
        return ["n"]
    if isinstance(value, torch.dtype):
        return ["d", str(value).removeprefix("torch.")]
    if isinstance(value, torch.device):
        return ["v", str(value)]
    if isinstance(value, torch.layout):
        return ["y", str(value).removeprefix("torch.")]
    if isinstance(value, torch.memory_format):
        return ["m", str(value).removeprefix("torch.")]
    if type(value) is torch.Size:
        return ["S", [_describe(v, depth + 1) for v in value]]
    if type(value) is list:
        return ["l", [_describe(v, depth + 1) for v in value]]
    if type(value) is tuple:
        return ["u", [_describe(v, depth + 1) for v in value]]
    if type(value) is dict and all(type(k) is str for k in value):
        return ["k", [[k, _describe(v, depth + 1)] for k, v in value.items()]]
    raise _Skip


# -- in the zygote: the answers ----------------------------------------------------------


class Answers:
    """The questions jobs sent, asked again by the zygote while it is idle."""

    def __init__(self) -> None:
        self.pending: collections.deque[Any] = collections.deque()
        self.modes: dict[Any, Any] = {}

    def learn(self, data: bytes) -> None:
        """A job's questions, read as untrusted data (garbage teaches nothing)."""
        if not ENABLED or not data or len(data) > MAX_BYTES:
            return
        try:
            questions = msgpack.unpackb(data, raw=False, strict_map_key=True, max_array_len=MAX_QUESTIONS, max_map_len=64)
        except Exception:  # noqa: BLE001 - not what ``questions`` writes
            return
        if isinstance(questions, list):
            room = MAX_QUESTIONS - len(self.pending)
            self.pending.extend(questions[: max(0, room)])

    @property
    def wanted(self) -> bool:
        return bool(self.pending)

    def answer(self, interrupted: Callable[[], bool]) -> int:
        """Ask the waiting questions until done or ``interrupted()``; how many cache
        entries that added."""
        from exportlens.core.torchcompat import FakeTensorMode

        cache = FakeTensorMode.cache
        before = len(cache)
        while self.pending and not interrupted() and len(cache) < MAX_ENTRIES:
            question = self.pending.popleft()
            with contextlib.suppress(Exception):  # a question that is not one: nothing learned
                self._ask(question)
        if len(cache) >= MAX_ENTRIES:
            # No room for their answers: kept, they would stay ``wanted`` and the idle
            # worker would go round its loop asking none, without ever waiting.
            self.pending.clear()
        if not self.pending:
            self.modes.clear()
        return len(cache) - before

    def _ask(self, question: Any) -> None:
        import torch

        namespace, name, overload, state, args, kwargs = question
        op = _operator(namespace, name, overload)
        dtype_name, device, inference, settings = state
        dtype = _dtype(dtype_name)
        if not dtype.is_floating_point or device != torch._C._get_default_device() or type(inference) is not bool:
            return
        mode = self._mode(settings)
        found: list[bool] = []
        with torch.inference_mode(inference):
            call_args = _build(args, mode, 0, found)
            call_kwargs = _build(kwargs, mode, 0, found)
        if not isinstance(call_args, tuple) or not isinstance(call_kwargs, dict) or not (found or _constructor(op)):
            return  # no tensor, and not a constructor: a call fake tensors would run for real
        # Straight to the mode, as the dispatcher hands it a call during tracing: a
        # composite operator (``linear``) reaches the fake mode itself there, where
        # calling it would decompose it first.
        from exportlens.core.torchcompat import FakeTensor

        # Below autograd and its view tracking too, as there: an operator a
        # decomposition calls must not record grad, nor a view inherit its base's (a
        # cached output that required grad where tracing's did not would change every
        # later key, and the program).
        with _default_dtype(dtype), torch.inference_mode(inference), torch._C._AutoDispatchBelowADInplaceOrView():
            mode.__torch_dispatch__(op, (FakeTensor,), call_args, call_kwargs)

    def _mode(self, settings: Any) -> Any:
        from torch.fx.experimental.symbolic_shapes import ShapeEnv, ShapeEnvSettings

        from exportlens.core.torchcompat import FakeTensorMode

        if settings is None:
            key: Any = None
        else:
            fields = {f.name for f in dataclasses.fields(ShapeEnvSettings)}
            if not isinstance(settings, dict) or set(settings) != fields or not all(type(v) in (bool, int) for v in settings.values()):
                raise _Skip
            key = tuple(sorted(settings.items()))
        if key not in self.modes:
            self.modes[key] = FakeTensorMode(shape_env=None if settings is None else ShapeEnv(**settings))
        return self.modes[key]


def _operator(namespace: Any, name: Any, overload: Any) -> Any:
    import torch

    from exportlens.core import torchcompat

    if namespace not in NAMESPACES or not (isinstance(name, str) and isinstance(overload, str) and name.isidentifier() and overload.isidentifier()):
        raise _Skip
    try:
        op = getattr(getattr(getattr(torch.ops, namespace), name), overload)
    except (AttributeError, RuntimeError) as e:
        raise _Skip from e
    if not isinstance(op, torchcompat.OpOverload) or not _carried(op):
        raise _Skip
    return op


def _carried(op: Any) -> bool:
    """Whether calls of ``op`` are asked again in the zygote: an ``aten``/``prims``
    operator without effects (``aten::_print`` and its kind would act), not in place
    (it would write to the question's tensors; cheap to compute in the job)."""
    from exportlens.core.torchcompat import has_effects

    return op.namespace in NAMESPACES and not has_effects(op) and not op._schema.is_mutable


def _constructor(op: Any) -> bool:
    """A tensor constructor (``arange``, ``scalar_tensor``): fake tensors make its
    output on the meta device, whatever its arguments."""
    from exportlens.core.torchcompat import is_tensor_constructor

    return bool(is_tensor_constructor(op))


def _dtype(name: Any) -> Any:
    import torch

    value = getattr(torch, name, None) if isinstance(name, str) and name.isidentifier() else None
    if not isinstance(value, torch.dtype):
        raise _Skip
    return value


def _named(kind: type, name: Any) -> Any:
    import torch

    value = getattr(torch, name, None) if isinstance(name, str) and name.isidentifier() else None
    if not isinstance(value, kind):
        raise _Skip
    return value


def _int(value: Any, low: int = 0, high: int = 1 << 62) -> int:
    if type(value) is not int or not low <= value <= high:
        raise _Skip
    return value


def _build(item: Any, mode: Any, depth: int, found: list[bool]) -> Any:
    """The value a description stands for: plain values, or a fake tensor of ``mode``
    with the metadata given (made from a meta tensor: nothing is allocated)."""
    import torch

    if depth > MAX_DEPTH + 1 or not isinstance(item, list) or not item or not isinstance(item[0], str):
        raise _Skip
    tag, rest = item[0], item[1:]
    if tag == "t" and len(rest) == 8:
        dtype_name, shape, stride, offset, nbytes, device, grad, inference = rest
        dtype = _dtype(dtype_name)
        if not (isinstance(shape, list) and isinstance(stride, list) and len(shape) == len(stride) <= MAX_DIMS):
            raise _Skip
        shape = [_int(n) for n in shape]
        stride = [_int(n) for n in stride]
        offset, nbytes = _int(offset), _int(nbytes)
        if not isinstance(device, str) or type(grad) is not bool or type(inference) is not bool or nbytes % dtype.itemsize:
            raise _Skip
        if all(shape) and offset + sum((n - 1) * s for n, s in zip(shape, stride, strict=True)) >= nbytes // dtype.itemsize:
            raise _Skip  # a view past the end of its storage: no tensor torch made
        with torch.inference_mode(inference):
            base = torch.empty((nbytes // dtype.itemsize,), dtype=dtype, device="meta")
            meta = base.as_strided(shape, stride, offset)
        found.append(True)
        fake = mode.fake_tensor_converter.from_meta_and_device(mode, meta, torch.device(device))
        if grad:
            if not (dtype.is_floating_point or dtype.is_complex):
                raise _Skip
            fake.requires_grad_(True)
        return fake
    if len(rest) == 1 and tag in "bifs":
        kind = {"b": bool, "i": int, "f": float, "s": str}[tag]
        if type(rest[0]) is not kind:
            raise _Skip
        return rest[0]
    if tag == "n" and not rest:
        return None
    if tag == "d" and len(rest) == 1:
        return _dtype(rest[0])
    if tag == "v" and len(rest) == 1 and isinstance(rest[0], str):
        return torch.device(rest[0])
    if tag == "y" and len(rest) == 1:
        return _named(torch.layout, rest[0])
    if tag == "m" and len(rest) == 1:
        return _named(torch.memory_format, rest[0])
    if tag in ("S", "l", "u") and len(rest) == 1 and isinstance(rest[0], list):
        items = [_build(v, mode, depth + 1, found) for v in rest[0]]
        if tag == "S":
            return torch.Size([_int(v, -(1 << 62)) for v in items])
        return items if tag == "l" else tuple(items)
    if tag == "k" and len(rest) == 1 and isinstance(rest[0], list):
        pairs = rest[0]
        if not all(isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) for p in pairs):
            raise _Skip
        return {k: _build(v, mode, depth + 1, found) for k, v in pairs}
    raise _Skip


@contextlib.contextmanager
def _default_dtype(dtype: Any) -> Iterator[None]:
    import torch

    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(before)


class AnswerSpeedUp(SpeedUp):
    """Fake-tensor answers as the zygote's plug-in: the calls jobs made are asked again
    in the worker once their result is out, for later jobs to inherit (``Answers``)."""

    name = "fake-tensor answers"

    def __init__(self) -> None:
        self.answers = Answers()

    def idle(self, worker: Worker, idle_s: float) -> tuple[bool, str | None]:
        if not self.answers.wanted or worker.input_waiting():
            return False, None
        self.after_result(worker)
        return True, None

    def learn(self, attempt: Lessons, forked: bool) -> None:
        if attempt.fake_cache and forked:  # a spawned job's fake tensors are none of ours
            self.answers.learn(attempt.fake_cache)

    def after_result(self, worker: Worker) -> None:
        """Ask the calls again, here, until done, or a request waits once
        ``ANSWER_BEFORE_NEXT_S`` is spent (the rest waits for the next idle moment): a
        later job finds torch's answers in the cache it inherits. New objects are
        frozen with the rest."""
        if not self.answers.wanted:
            return
        # Before the next request, up to a budget: a save that comes right after a
        # result (the editor's next keystroke, ``check``'s next file) finds them.
        until = time.monotonic() + ANSWER_BEFORE_NEXT_S
        added = self.answers.answer(lambda: time.monotonic() > until and worker.input_waiting())
        if added >= WORTH_A_NEW_STANDBY:
            worker.drop_standbys(forks_only=True)  # forked before: they lack them (a spawned job never has them)
        if added:
            settle()
            gc.freeze()
            mark(f"zygote: {added} fake-tensor cache entries kept")
