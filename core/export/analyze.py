"""Turning export outcomes into diagnostics at the user's own lines. Torch-free.

The worker hands this module plain facts (an exception's class names, message and
frames; warnings' texts; a finished signature) so that the rules can be tested as
tables, without torch.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from exportlens.core.model.results import Related
from exportlens.core.model.signature import SourceLine
from exportlens.core.source.frames import Frame, deepest_in_file, frames_in_text, same_file
from exportlens.core.source.project import UserSources
from exportlens.core.source.sourcemap import SourceIndex
from exportlens.core.source.spans import statement_at


@dataclass(frozen=True)
class ErrorFacts:
    """What the job learned about one failed export."""

    type_names: tuple[str, ...]  # the exception's MRO class names, most derived first
    message: str
    frames: tuple[Frame, ...]  # innermost last, chained exceptions included
    error_type: str | None = None  # torch._dynamo.exc.UserErrorType name, when any


# -- classification -----------------------------------------------------------

_DATA_DEPENDENT = (
    "Could not guard on data-dependent expression",
    "Could not extract specialized integer from data-dependent expression",
)
_UNSUPPORTED_TYPE = (
    "which is not a known type",
    "Unsupported input type",
    "register a pytree",
    "is not a registered pytree",
    "not supported as an output",
    "Unsupported output type",
    "must be registered as a pytree",
)
_UNSUPPORTED_NAMES = {"Unsupported", "UncapturedHigherOrderOpError", "UnsupportedOperatorError"}
_UNSUPPORTED_USER_ERRORS = {"DYNAMIC_CONTROL_FLOW", "ANTI_PATTERN", "STANDARD_LIBRARY", "UNSUPPORTED_ALIASED_MUTATED_DYNAMIC_INPUTS"}
_PARAM_GRAD = "a leaf Variable that requires grad is being used in an in-place operation"
_META_MUTATION = ("num_mutated_inp_runtime_indices", "metadata mutation", "received a metadata mutation")
# Errors that say the user's code is wrong for any input, not just under export.
_EAGER_NAMES = {"TypeError", "IndexError", "KeyError", "AttributeError", "NameError", "ZeroDivisionError", "UnboundLocalError", "NotImplementedError"}
_EAGER_PATTERNS = (
    "must match the size of tensor",
    "mat1 and mat2 shapes cannot be multiplied",
    "must have same reduction dim",
    "shape '[",
    "size mismatch",
    "expected scalar type",
    "Expected all tensors to be on the same device",
    "dimension out of range",
    "Dimension out of range",
    "out of bounds",
    "The size of tensor a",
    "is not broadcastable",
    "expected input",
    "Expected input",
    "found dtype",
    "but got",
)


def classify(facts: ErrorFacts) -> str:
    """The diagnostic code for a failed export."""
    names = set(facts.type_names)
    msg = facts.message
    if facts.error_type == "CONSTRAINT_VIOLATION" or "Constraints violated" in msg or "ConstraintViolationError" in names:
        return "constraint-violation"
    if "GuardOnDataDependentSymNode" in names or any(p in msg for p in _DATA_DEPENDENT):
        return "data-dependent"
    if _PARAM_GRAD in msg:
        return "banned-mutation/parameter"
    if any(p in msg for p in _META_MUTATION):
        return "banned-mutation/input-metadata"
    if any(p in msg for p in _UNSUPPORTED_TYPE) or facts.error_type in {"INVALID_INPUT", "INVALID_OUTPUT"} and "type" in msg.lower():
        return "unsupported-type"
    if names & _UNSUPPORTED_NAMES or facts.error_type in _UNSUPPORTED_USER_ERRORS:
        return "unsupported"
    return "export-error"


def build_advice(message: str) -> str:
    """What to do about a target that failed to build, when its message says more
    than torch does: a weight initialisation that changes a parameter in place
    outside ``torch.no_grad()`` (``nn.init`` functions run under it)."""
    if _PARAM_GRAD in message:
        return (
            "\nThe model's construction changes a parameter in place while autograd records it "
            "(a weight-init function such as `w.normal_()` or `w.mul_(...)` on a parameter): run it under "
            "`with torch.no_grad():` (as `torch.nn.init` does), or use the `torch.nn.init` functions."
        )
    return ""


def is_eager_like(facts: ErrorFacts) -> bool:
    """Whether the error looks like the model failing as plain Python would."""
    if set(facts.type_names) & _EAGER_NAMES:
        return True
    return any(p in facts.message for p in _EAGER_PATTERNS)


# -- messages ------------------------------------------------------------------

_NOISE = (
    "For more information, run with",
    "For extended logs",
    "If you suspect the guard was triggered from C++",
    "For more debugging help, see",
    "For C++ stack trace",
    "The error above occurred when calling torch.export.export",
    "(Size-like symbols",
    "from user code:",
    "Set TORCHDYNAMO_VERBOSE=1",
    "Explanation:",
    "Developer debug context:",
    "For more details about this graph break",
)


def clean_message(message: str, limit: int = 1200) -> str:
    """Torch's message without its log-flag boilerplate and embedded stack."""
    lines: list[str] = []
    skipping_stack = False
    in_frame = False
    for line in message.splitlines():
        stripped = line.strip()
        # A quoted frame ("File ..., line N") and its code and caret lines.
        if stripped.startswith('File "') and ", line " in stripped:
            in_frame = True
            continue
        if in_frame and line.startswith("    "):
            continue
        in_frame = False
        if stripped.startswith(("User Stack (most recent call last)", "The following call raised this error", "Traceback (most recent call last)")):
            skipping_stack = True
            continue
        if skipping_stack:
            if not stripped or line.startswith((" ", "\t")):
                continue
            skipping_stack = False
        for noise in _NOISE:
            at = line.find(noise)
            if at >= 0:
                line = line[:at]
        if line.strip():
            lines.append(line.rstrip())
    text = "\n".join(lines).strip()
    text = re.sub(r"\n{3,}", "\n\n", text)
    if len(text) > limit:
        # torch's "Suggested fixes:" block ends a constraint violation; it is what the
        # Dim fix applies (``core/fixes/dims``), so it stays whole and the rest is cut.
        at = text.find("\nSuggested fixes:")
        tail = text[at:] if at >= 0 and len(text) - at < limit // 2 else ""
        text = text[: limit - 1 - len(tail)].rstrip() + "…" + tail
    return text or message.strip()[:limit]


_DD_EXPR = re.compile(r"data-dependent expression (.+?) \(unhinted")
_DIM_NAMES = re.compile(r"Constraints violated \(([^)]*)\)")
_CAUSED_BY = re.compile(r"([\w./\\-]+\.py):(\d+) in (\w+)")


def data_dependent_message(expr: str | None, statement: str | None = None, library: tuple[str, int, str] | None = None) -> str:
    """What a ``data-dependent`` diagnostic says: what export could not decide, where,
    and the two ways out. ``statement`` is the user's line when ``draft_export``
    named it (one diagnostic per line); otherwise torch's message follows."""
    if statement is not None and library is not None:
        file, line, code = library
        inside = f"`{code}` ({file}:{line})" if code else f"{file}:{line}"
        head = (
            f"`{statement}` calls into a library whose check {inside} depends on the value of a tensor, "
            f"not its shape: export cannot decide `{expr}`"
        )
    elif statement is not None:
        head = f"`{statement}` depends on the value of a tensor, not its shape: export cannot decide `{expr}`"
    elif expr:
        head = f"export cannot decide `{expr}`: it depends on the value of a tensor, not its shape"
    else:
        head = "export cannot branch on a data-dependent value"
    return f"{head}. Tell export what holds with `torch._check(...)` (or `torch._check_is_size`), or use `torch.cond` to keep both branches."


_SUGGESTED_CONSTANT = re.compile(r"^\s*(\w+) = (-?\d+)\s*$", re.M)
_FOUND_TYPE = re.compile(r"Found <class '([\w.]+)'>")
_FAKE_NUMPY = ".numpy() is not supported for tensor subclasses"
_DYNAMO_RANDOM = "source=RandomValueSource("


def suggested_constants(message: str) -> list[tuple[str, int]]:
    """torch's "Suggested fixes" that make a declared dynamic dim a constant (``batch = 1``)."""
    at = message.find("Suggested fixes:")
    return [(m.group(1), int(m.group(2))) for m in _SUGGESTED_CONSTANT.finditer(message[at:])] if at >= 0 else []


def _constant_advice(name: str, value: int) -> str:
    # Taking torch's suggestion as is would silently turn the dynamic dim static.
    head = f"torch's suggested fix `{name} = {value}` would remove the dynamic dim `{name}` (the program would accept only size {value})"
    if value in (0, 1):
        return (
            f"{head}. Export specialises sizes 0 and 1, so an example input of size {value} fixes `{name}`: "
            f"keep `{name}` dynamic and give an example input with a size >= 2 in that dimension instead."
        )
    return f"{head}. Keep it dynamic by removing what fixes it to {value}, or declare it static (`Dim.STATIC`) if it really is always {value}."


def _cache_type(message: str) -> str | None:
    """The Hugging Face cache class a model returned (``DynamicCache``), when that is the unknown type."""
    m = _FOUND_TYPE.search(message)
    if m is None:
        return None
    qual = m.group(1)
    short = qual.rsplit(".", 1)[-1]
    return short if qual.startswith("transformers.") and (short.endswith("Cache") or ".cache_utils." in qual) else None


def message_for(code: str, facts: ErrorFacts, target: str, statement: str | None = None) -> str:
    """What a diagnostic says; ``statement`` is the user's line the diagnostic points at,
    when torch's message needs it named (``.numpy()`` under fake tensors)."""
    msg = clean_message(facts.message)
    if code == "data-dependent":
        m = _DD_EXPR.search(facts.message)
        return data_dependent_message(m.group(1) if m else None) + "\n" + msg
    if code == "constraint-violation":
        advice = [_constant_advice(n, v) for n, v in suggested_constants(facts.message)]
        return "\n".join(["the declared dynamic_shapes are violated: " + msg, *advice])
    if _FAKE_NUMPY in facts.message:
        line = f"`{statement}` calls" if statement else "the model calls"
        return (
            f"{line} `.numpy()`, which cannot run under export: export traces with fake tensors "
            "(shapes and dtypes, no data), so there are no values to convert. Keep the computation "
            "in torch ops (`x.sum()` instead of `x.numpy().sum()`), or move it out of `forward`.\n" + msg
        )
    if _DYNAMO_RANDOM in facts.message:
        line = f"`{statement}` draws" if statement else "the model draws"
        return (
            f"{line} a Python random number, which strict export cannot trace: TorchDynamo would make the value "
            "drawn at trace time an input of the program. Export with `strict=False` (torch's default: non-strict "
            "export runs `forward` as Python), or draw it with a torch op (`torch.rand(())`).\n"
            # The number drawn changes with every run: the message must not.
            + re.sub(r"value=[^,]*, source=", "value=..., source=", msg)
        )
    cache = _cache_type(facts.message) if code == "unsupported-type" else None
    if cache is not None:
        return (
            f"the model returns its key/value cache (`{cache}`), which export cannot return: "
            "pass `use_cache=False` (to the call, or set `config.use_cache = False`) so it returns tensors only.\n" + msg
        )
    if code == "unsupported-type":
        return (
            msg
            + "\nRegister the type with `torch.utils._pytree.register_pytree_node` "
            "(or `torch.export.register_dataclass`), or return/accept plain tensors "
            "(for transformers models, pass `use_cache=False`)."
        )
    if code == "banned-mutation/parameter":
        return (
            "in-place mutation of a parameter that requires grad is banned in export: "
            "mutate a buffer instead, or run it under `torch.no_grad()`/set `requires_grad=False`."
        )
    if code == "banned-mutation/input-metadata":
        return (
            "metadata mutation of a graph input (a shape/stride change such as `transpose_`, "
            "`t_`, `squeeze_`, `resize_`) is banned in export: use the out-of-place op "
            "(`x = x.transpose(0, 1)`)."
        )
    if code == "eager-error":
        return f"`{target}` fails when run: " + msg
    return msg


def library_place(path: str) -> str:
    """A library file as people name it: from its package folder on
    (``transformers/models/gpt_neox/modeling_gpt_neox.py``), else its folder and name."""
    parts = path.replace("\\", "/").split("/")
    for marker in ("site-packages", "dist-packages"):
        if marker in parts:
            return "/".join(parts[len(parts) - parts[::-1].index(marker) :])
    return "/".join(parts[-2:])


def eager_failure_message(target: str, facts: ErrorFacts, library: Frame | None, library_line: str = "", called: bool = True) -> str:
    """What an ``eager-error`` found by running the model once without export says:
    that it fails without export too, what raised, where in a library when the
    innermost frame is one (``library``: that frame, its code ``library_line``), and
    whether a line of the user's called it (``called``: the diagnostic stands there)."""
    detail = clean_message(facts.message)
    kind = next(iter(facts.type_names), "an exception")
    head = f"`{target}` fails without export too: running it once on the example inputs raises {kind}" + (f": {detail}" if detail else "")
    if library is None:
        return head
    code_text = f" (`{library_line}`)" if library_line else ""
    where = f"\nIt is raised inside a library, at {library_place(library.file)}:{library.line}{code_text}"
    where += ", in the call this line makes." if called else "; no line of your files is on the stack (the model's code is the library's)."
    return head + where


# -- locating ------------------------------------------------------------------


def message_frames(message: str, path: str) -> list[Frame]:
    """Frames of the model file quoted in torch's message (user stacks, "Caused by")."""
    out = [Frame(f, line, fn) for f, line, fn in frames_in_text(message) if same_file(f, path)]
    if out:
        return out
    real = os.path.realpath(path)
    for m in _CAUSED_BY.finditer(message):
        fragment = m.group(1)
        if real.endswith(fragment.lstrip("./")) and len(fragment) >= 4:
            out.append(Frame(path, int(m.group(2)), m.group(3)))
    return out


def locate(facts: ErrorFacts, path: str, index: SourceIndex, fallback: SourceLine, sources: UserSources | None = None) -> SourceLine:
    """The user's line for an export error: the deepest frame in the file (with
    ``sources``: in any of the user's files, the local modules included), else the
    deepest frame torch quotes in its message, else ``fallback`` (the target line)."""
    frame = sources.deepest(facts.frames) if sources is not None else deepest_in_file(facts.frames, path)
    if frame is not None and sources is not None:
        return sources.statement(frame)
    if frame is None:
        quoted = _quoted_user_frames(facts.message, sources) if sources is not None else []
        if quoted:
            return sources.statement(quoted[-1])  # type: ignore[union-attr]
        quoted = message_frames(facts.message, path)
        frame = quoted[-1] if quoted else None
    if frame is None:
        return fallback
    return statement_at(index, frame.line)


def _quoted_user_frames(message: str, sources: UserSources) -> list[Frame]:
    """Frames of the user's files that torch quotes in its message (``File "...", line N``)."""
    return [Frame(f, line, fn) for f, line, fn in frames_in_text(message) if sources.is_user(f)]


def output_location(facts: ErrorFacts, index: SourceIndex, module_class: type | None) -> SourceLine | None:
    """An output the program cannot return points at ``forward``'s ``return``."""
    if "output" not in facts.message or module_class is None:
        return None
    info = index.classes.get(getattr(module_class, "__qualname__", ""))
    forward = info.methods.get("forward") if info else None
    return forward.returns[-1] if forward and forward.returns else None


def constraint_location(
    facts: ErrorFacts, index: SourceIndex, path: str, sources: UserSources | None = None, within: tuple[int, int] | None = None
) -> tuple[SourceLine | None, tuple[Related, ...]]:
    """A constraint violation points at the ``Dim`` declaration (the target's own,
    ``within`` its lines, when it declares one); the specialising line in the model,
    when torch names it, becomes related information."""
    related: list[Related] = []
    where: SourceLine | None = None
    m = _DIM_NAMES.search(facts.message)
    names = [n.strip() for n in m.group(1).split(",")] if m else []
    for name in names:
        decl = index.dim_declaration(name, within)
        if decl is None:
            continue
        if where is None:
            where = decl
        else:
            related.append(Related(path, decl.line, f"`{name}` is declared here", decl.column))
    culprit = (sources.deepest(facts.frames) if sources is not None else None) or deepest_in_file(facts.frames, path)
    culprit = culprit or next(iter(message_frames(facts.message, path)[::-1]), None)
    if culprit is not None:
        where_path = os.path.realpath(culprit.file) if sources is not None and sources.is_user(culprit.file) else path
        related.append(Related(where_path, culprit.line, "the code that specialised the dimension"))
    return where, tuple(related)


# -- after a successful export ---------------------------------------------------
