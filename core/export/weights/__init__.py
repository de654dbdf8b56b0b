"""How a job makes a model's weights -- fake or real -- and why a run fell back.

The one owner of that choice: the job asks it, nothing else branches on "fake". The
steps after the build (the program run, the lowering destinations, the failure
explanations), the worker's retries and its failure messages ask it named questions
instead (:func:`values_real`, :func:`fake_explains`, :func:`retry_after_crash`,
:func:`with_real_weights`, :func:`real_weights_note`). What shows a result (the hover,
the text report) reads the ``weights`` field the result records, only to say which
weights it was made with.

``weights = "auto"`` (the default): user code runs (the file, a target's build) inside
:meth:`Policy.constructing`, where the large tensors a module's construction makes and
the large checkpoints it reads are fake: shape, dtype and device, no values
(``fake.py``, ``checkpoints.py``; ``patches.py`` for the two places torch cannot
handle one). The export is the same -- torch fakifies every weight anyway -- at a
fraction of the time and memory. Where values matter, the policy asks for the run to
be repeated with real weights, by raising :class:`RealWeightsNeeded` with the
sentence that says why; the job records it (``FileResult.fallbacks``) and the worker
runs the file again with ``weights = "real"`` for those targets
(``exportlens.core.isolation.attempts``). That happens when

- running the file, or building a target, failed because a value was read from a fake
  tensor (``.item()``, ``.tolist()``, ``.numpy()``, a library wanting its storage);
- an example input is fake (a view of a fake tensor too): torch must see the input
  the user made, and the eager runs below need its values;
- values are needed after the export: the eager run that explains a failed export,
  lowering that runs the program and compares it with eager.

-- unless real weights would not fit in the job's memory cap (what the fakes stand for,
plus a margin for torch itself): then the run stays fake and says so (``weights_note``),
rather than end in ``out-of-memory``.

``weights = "real"``: nothing is fake; the run is what it was before weights existed.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterator
from dataclasses import dataclass
from dataclasses import replace as _replace
from typing import TYPE_CHECKING, Any, Callable

from exportlens.core.model.results import Diagnostic, Fallback

if TYPE_CHECKING:
    from exportlens.core.export.targets import Built
    from exportlens.core.export.weights.fake import FakeWeights
    from exportlens.core.model.request import ExportRequest

# Tensors from this size up are made fake (1 MiB): every weight matrix of a model worth
# the trouble, none of the small tables a constructor computes with. The environment
# variable is for tests, which build everything fake to compare with real weights.
FAKE_MIN_BYTES = int(os.environ.get("EXPORTLENS_FAKE_MIN_BYTES", str(1 << 20)))
# Real weights fit when what the fakes stand for, plus this for torch and the export
# itself, stays under the job's memory cap.
REAL_MARGIN_BYTES = 1 << 30


class RealWeightsNeeded(Exception):
    """This run must be repeated with real weights; ``reason`` says why, for the user."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _gib(nbytes: int) -> str:
    return f"{nbytes / (1 << 30):.1f} GB" if nbytes >= 1 << 30 else f"{nbytes / (1 << 20):.0f} MB"


@dataclass
class Policy:
    choice: str  # "auto" or "real", as the user set it
    memory_mb: int
    why_real: str = ""  # set on a run the worker repeats with real weights: why
    fake: FakeWeights | None = None

    @classmethod
    def for_request(cls, request: ExportRequest) -> Policy:
        policy = cls(request.weights, request.limits.memory_mb, request.why_real)
        if policy.choice == "auto" and not policy.why_real:
            from exportlens.core import torchcompat

            policy.why_real = torchcompat.lacks("fake-weights") or ""  # said in each target's weights_note
        if policy.choice == "auto" and not policy.why_real:
            from exportlens.core.export.weights.fake import FakeWeights

            policy.fake = FakeWeights(FAKE_MIN_BYTES)
        return policy

    # -- while user code runs ------------------------------------------------------

    @contextlib.contextmanager
    def constructing(self) -> Iterator[None]:
        """The window in which the user's file runs or a target is built."""
        if self.fake is None:
            yield
            return
        import torch._functorch.config as functorch_config

        from exportlens.core.export.weights import checkpoints

        install()
        checkpoints.active = self.fake
        try:
            # A library reading a fake tensor's data pointer gets an error, not 0.
            with functorch_config.patch(fake_tensor_allow_unsafe_data_ptr_access=False), self.fake.constructing():
                yield
        finally:
            checkpoints.active = None

    def after_failure(self, error: BaseException, where: str | None = None) -> str | None:
        """For a failure of the file or of a build (``where``: its line, ``file.py:N``):
        raise :class:`RealWeightsNeeded` when a fake tensor caused it and real weights
        fit; else a note to add to the failure's message when it did (None when fake
        tensors are not the cause)."""
        from exportlens.core.export.weights.fake import fake_caused

        if self.fake is None or not self.fake.made or not fake_caused(error):
            return None
        at = f"`{where}`" if where else "the code"
        return self._fall_back(f"{at} needs the values of a large tensor, which is built without them by default")

    def inspect(self, built: Built) -> Built:
        """``built`` with ``weights`` set; raises :class:`RealWeightsNeeded` for a fake example input."""
        if self.fake is None:
            built.weights = "real"
            return built
        import torch
        from torch.utils import _pytree as pytree

        notes = self._constants_real(built.module)
        state: list[Any] = [*built.module.parameters(), *built.module.buffers()]
        built.weights = "fake" if any(self.fake.is_fake(t) for t in state) else "real"
        inputs = [leaf for leaf in pytree.tree_leaves((built.args, built.kwargs or {})) if isinstance(leaf, torch.Tensor)]
        if any(self.fake.is_fake(t) or self.fake.is_fake(getattr(t, "_base", None)) for t in inputs):
            notes.append(self._fall_back("an example input was built as a fake tensor, and torch must see the input as you made it"))
        built.weights_note = "; ".join(notes)
        return built

    def _constants_real(self, module: Any) -> list[str]:
        """Make each fake plain tensor attribute (a constant to torch.export, whose
        values torch computes with) real again by its recipe. One that has none (written
        to after it was made, or computed from a weight) raises :class:`RealWeightsNeeded`;
        where real weights do not fit, it is made of zeros, and the note says so."""
        assert self.fake is not None
        notes = []
        for slot, name, value in _tensor_attributes(module):
            if not self.fake.is_fake(value):
                continue
            real = self.fake.real_again(value)
            if real is None:
                note = self._fall_back(f"the tensor attribute `{name}` (a constant to torch.export, which computes with its values) was built fake and changed afterwards")
                import torch

                real = torch.zeros(value.shape, dtype=value.dtype)
                notes.append(f"{note}; it was exported as zeros")
            slot(real)
        return notes

    def require_values(self, built: Built, why: str) -> str | None:
        """Before a step that needs the weights' values (``why`` says which): raises
        :class:`RealWeightsNeeded` when they are fake and real ones fit; returns why
        they are not available when they do not; None when they are real."""
        if built.weights != "fake":
            return None
        return self._fall_back(why)

    def _fall_back(self, why: str) -> str:
        assert self.fake is not None
        need = self.fake.made_bytes + REAL_MARGIN_BYTES
        if need <= self.memory_mb << 20:
            raise RealWeightsNeeded(why)
        return (
            f"the model was built with fake weights, and {why}; with real weights it would need about "
            f"{_gib(need)}, over the memory cap of {self.memory_mb} MB (memory_mb): raise the cap to use real weights"
        )

    # -- what the result says ---------------------------------------------------------

    def describe(self, built: Built | None) -> tuple[str | None, str]:
        """``(weights, note)`` for a target's result: "fake" or "real" (None: never
        built), and why, when there is something to say."""
        if built is None:
            return None, ""
        if self.why_real:
            return "real", f"built with real weights: {self.why_real}"
        return built.weights, built.weights_note


# -- questions the steps after the build ask --------------------------------------------


def values_real(built: Built) -> bool:
    """Do the weights hold their values, so that a step that reads them (a run of the
    program, an ONNX model, a ``.pte``, draft_export) may run? False where large
    weights were built without values (``Policy.inspect``)."""
    return built.weights != "fake"


def fake_explains(built: Built, error: BaseException) -> bool:
    """Is ``error``, from running the built model after its export, what a fake
    tensor's missing values cause (and so no finding about the model)?"""
    if values_real(built):
        return False
    from exportlens.core.export.weights.fake import fake_caused

    return fake_caused(error)


# -- questions the worker asks, around the job ----------------------------------------

# Why a job that crashed is run again with real weights (``retry_after_crash``).
CRASHED_FAKE = "the export process crashed while the model held fake tensors (a library may have wanted their data)"


def retry_after_crash(request: ExportRequest) -> bool:
    """Run a request whose job process crashed again with real weights? Where its
    weights may have been fake: a library handed a fake tensor may crash where it would
    run on a real one (the reason: :data:`CRASHED_FAKE`)."""
    return request.weights == "auto"


def with_real_weights(request: ExportRequest, reason: str) -> ExportRequest:
    """``request`` to run again with real weights, ``reason`` saying why."""
    return _replace(request, weights="real", why_real=reason)


def real_weights_note(request: ExportRequest) -> str | None:
    """For a job that ran out of memory: why its weights were real (where they were),
    the sentence that ends its message; None where they may have been fake."""
    if request.why_real:
        return f"exportlens built the model with real weights because {request.why_real}"
    if request.weights == "real":
        return (
            'the model was built with real weights (weights = "real"): with weights = "auto" '
            "(--weights auto) exportlens builds its large tensors without values, which the export never reads"
        )
    return None


def annotate(diagnostic: Diagnostic, note: str | None) -> Diagnostic:
    """A failure's diagnostic with the policy's note on why real weights were not used."""
    if not note:
        return diagnostic
    from dataclasses import replace

    return replace(diagnostic, message=f"{diagnostic.message}\n{note}")


def fallbacks(needed: dict[str | None, str]) -> tuple[Fallback, ...]:
    return tuple(Fallback(target, reason) for target, reason in needed.items())


def _tensor_attributes(module: Any) -> Iterator[tuple[Callable[[Any], None], str, Any]]:
    """``(set it, name, tensor)`` for each plain tensor attribute of a module tree, also
    in a list, tuple or dict attribute (``self.caches[0]``): not a parameter or buffer,
    a constant to torch.export."""
    import torch

    for sub in module.modules():
        attributes = vars(sub)
        for name, value in list(attributes.items()):
            if name in _MODULE_REGISTRIES:
                continue
            if isinstance(value, torch.Tensor):
                yield functools.partial(attributes.__setitem__, name), name, value
            elif isinstance(value, (list, dict)):
                for key, item in list(value.items() if isinstance(value, dict) else enumerate(value)):
                    if isinstance(item, torch.Tensor):
                        yield functools.partial(value.__setitem__, key), f"{name}[{key!r}]", item
            elif isinstance(value, tuple) and any(isinstance(item, torch.Tensor) for item in value):
                for i, item in enumerate(value):
                    if isinstance(item, torch.Tensor):
                        yield functools.partial(_set_in_tuple, attributes, name, i), f"{name}[{i}]", item


# nn.Module's own tables (parameters, buffers, submodules): its state, not constants.
_MODULE_REGISTRIES = frozenset({"_parameters", "_buffers", "_modules"})


def _set_in_tuple(attributes: dict[str, Any], name: str, i: int, new: Any) -> None:
    old = attributes[name]
    attributes[name] = type(old)(*old[:i], new, *old[i + 1 :]) if hasattr(old, "_fields") else (*old[:i], new, *old[i + 1 :])


def install() -> None:
    """Install the torch patches (``patches.py``) and the checkpoint readers, once;
    nothing where this torch lacks what fake weights need (``Policy.for_request`` says so)."""
    from exportlens.core import torchcompat
    from exportlens.core.export.weights import checkpoints, patches

    if torchcompat.lacks("fake-weights") is not None:
        return
    patches.install(checkpoints.fake_load)
    checkpoints.install_safetensors()
