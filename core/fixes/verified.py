"""Fixes proven by re-export: which of a result's candidate fixes export and keep the
model's outputs, found in one bounded loop.

``fixes_for`` proposes edits from the source and the diagnostic alone; a proposal is
offered to the user only once a verification job (``core/export/verify``, run by the
front end's ``run``: the CLI's pool, the server's workers) has exported the edited
text and compared the program's outputs with the model's:

* ``kept``: offered; preferred when its family meant it to keep the outputs;
* ``changed``: offered, never preferred, its title saying what changes;
* ``failed``: not offered, unless the edited export fails with a diagnostic of the
  same code that has a fix of its own (a second value export needs a fact about, a
  second dim): that fix is made on the edited text and the two are tried together,
  for at most ``MAX_ROUNDS`` rounds, each round one job for all the file's trials.

The whole loop stops at its deadline; what it verified by then is what is offered.
Torch-free: the jobs run elsewhere, this only decides what to try next.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from exportlens.core.fixes import fixes_for
from exportlens.core.fixes.model import Fix, TextEdit, apply, diff_edits
from exportlens.core.model.request import ExportRequest, Trial
from exportlens.core.model.results import Diagnostic, FileResult, Verdict

log = logging.getLogger(__name__)

MAX_ROUNDS = 4  # one fix and up to three follow-ups of the same code
MAX_TRIALS = 32  # per round: a file with more diagnostics gets the first ones' fixes

Run = Callable[[ExportRequest], FileResult]
Read = Callable[[str], "str | None"]


@dataclass(frozen=True)
class Offered:
    """A verified fix, as every front end shows it: ``fix`` (its edits against the
    texts the result was made from, each with its file), and what verification found."""

    fix: Fix
    status: str  # "kept" or "changed"
    detail: str = ""


@dataclass(frozen=True)
class _Pending:
    diagnostic: Diagnostic  # the original one, in the result
    target: str
    code: str
    titles: tuple[str, ...]
    preferred: bool
    texts: tuple[tuple[str, str], ...]  # every file the chain edited, as it leaves it
    edits: tuple[TextEdit, ...] = ()  # the first fix's own edits, each with its file
    # A trial of several diagnostics' fixes at once (a target export fails on until
    # all are fixed): what it finds holds for each of them, offered on its own.
    members: tuple[_Pending, ...] = ()


def _edited(texts: dict[str, str], fix: Fix, file: str, read: Read) -> dict[str, str] | None:
    """``texts`` with ``fix`` applied; a file it edits that ``texts`` lacks (a local
    module the class is in) is read, and added to ``texts`` as it was."""
    out = dict(texts)
    by_file: dict[str, list[TextEdit]] = {}
    for e in fix.edits:
        by_file.setdefault(os.path.realpath(e.path) if e.path else file, []).append(replace(e, path=None))
    for path, edits in by_file.items():
        if path not in out:
            text = read(path)
            if text is None:
                return None
            out[path] = text
        out[path] = apply(out[path], edits)
    return out


def _proposals(result: FileResult, d: Diagnostic, texts: dict[str, str], read: Read, own: str) -> list[Fix]:
    file = os.path.realpath(d.path) if d.path else own
    if file not in texts:
        text = read(file)
        if text is None:
            return []
        texts[file] = text
    return fixes_for(texts[file], replace(d, path=None), result, read)


def has_candidates(result: FileResult, read: Read, only: str | None = None) -> bool:
    """Whether some diagnostic of ``result`` (in the file ``only``, when given) has a
    fix to verify: a front end starts a verification only then."""
    for d in result.diagnostics:
        path = os.path.realpath(d.path or result.path)
        if d.target is None or (only is not None and path != only):
            continue
        text = read(path)
        try:
            if text is not None and fixes_for(text, replace(d, path=None), result, read):
                return True
        except Exception:  # noqa: BLE001 - a fix that cannot be computed is not offered
            log.exception("computing fixes for %r failed", d)
    return False


def verify(request: ExportRequest, result: FileResult, run: Run, read: Read, *, deadline_s: float, next_id: Callable[[], int]) -> list[Offered]:
    """The verified fixes of ``result``'s diagnostics (``request`` is the export's
    that made it: its texts are the originals)."""
    own = os.path.realpath(request.path)
    originals: dict[str, str] = {}
    text = request.source if request.source is not None else read(own)
    if text is None:
        return []
    originals[own] = text
    originals.update({os.path.realpath(p): t for p, t in request.overlays})
    read = _reading_once(read, originals)

    pending: list[_Pending] = []
    seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    for d in result.diagnostics:
        if d.target is None:
            continue
        file = os.path.realpath(d.path) if d.path else own
        for fix in _proposals(result, d, originals, read, own):
            texts = _edited(originals, fix, file, read)
            if texts is None:
                continue
            changed = tuple(sorted((p, t) for p, t in texts.items() if t != originals.get(p)))
            if not changed or (d.target, changed) in seen:
                continue
            seen.add((d.target, changed))
            edits = tuple(replace(e, path=os.path.realpath(e.path) if e.path else file) for e in fix.edits)
            pending.append(_Pending(d, d.target, d.code, (fix.title,), fix.preferred, changed, edits))
    pending += _together(pending, originals, seen)
    offered: list[Offered] = []
    started = time.monotonic()
    for round_ in range(MAX_ROUNDS):
        if not pending or time.monotonic() - started > deadline_s:
            break
        batch, pending = pending[:MAX_TRIALS], []
        ids = {next_id(): p for p in batch}
        trials = tuple(Trial(i, p.target, p.texts, p.code, codes=tuple(dict.fromkeys(m.code for m in p.members))) for i, p in ids.items())
        answer = run(replace(request, id=next_id(), trials=trials, lower=(), keep_lowered=()))
        for verdict in answer.verdicts:
            chain = ids.get(verdict.id)
            if chain is None:
                continue
            if verdict.status in ("kept", "changed"):
                for one in chain.members or (chain,):
                    new = _offer(one, verdict, originals)
                    if all((o.fix.diagnostic, o.fix.edits) != (new.fix.diagnostic, new.fix.edits) for o in offered):
                        offered.append(new)
            elif round_ + 1 < MAX_ROUNDS:
                pending += _next(chain, verdict, result, read, seen, own, originals)
    return offered


def _reading_once(read: Read, originals: dict[str, str]) -> Read:
    """``read`` that keeps what it read in ``originals``: every file is read once, and
    each fix's edits are made against the text it had then."""

    def once(path: str) -> str | None:
        if path not in originals:
            found = read(path)
            if found is None:
                return None
            originals[path] = found
        return originals[path]

    return once


def _together(pending: list[_Pending], originals: dict[str, str], seen: set[tuple[str, tuple[tuple[str, str], ...]]]) -> list[_Pending]:
    """For each target with several diagnostics that have fixes, one trial of the
    first fix of each (the preferred first), applied together: a target's export
    fails until every error is gone, so no fix alone can be shown to export."""
    out = []
    for target in dict.fromkeys(p.target for p in pending):
        firsts: dict[Diagnostic, _Pending] = {}
        for p in sorted((p for p in pending if p.target == target and p.edits), key=lambda p: not p.preferred):
            firsts.setdefault(p.diagnostic, p)
        if len(firsts) < 2:
            continue
        by_file: dict[str, list[TextEdit]] = {}
        for p in firsts.values():
            for e in p.edits:
                by_file.setdefault(e.path or "", []).append(replace(e, path=None))
        texts = dict(originals)
        try:
            for path, edits in by_file.items():
                if path not in texts or _overlapping(edits):
                    raise KeyError(path)
                texts[path] = apply(texts[path], edits)
        except KeyError:
            continue
        changed = tuple(sorted((p, t) for p, t in texts.items() if t != originals.get(p)))
        if (target, changed) in seen:
            continue
        seen.add((target, changed))
        members = tuple(firsts.values())
        first = members[0]
        out.append(_Pending(first.diagnostic, target, first.code, tuple(m.titles[0] for m in members), all(m.preferred for m in members), changed, (), members))
    return out


def overlap(a: TextEdit, b: TextEdit) -> bool:
    """Whether two edits touch the same text: ranges that intersect, or an insertion
    inside the other's range. Two insertions at one point do not (both go in)."""
    a0, a1, b0, b1 = (a.line, a.column), (a.end_line, a.end_column), (b.line, b.column), (b.end_line, b.end_column)
    if a0 == a1 and b0 == b1:
        return False
    if a0 == a1:
        return b0 < a0 < b1
    if b0 == b1:
        return a0 < b0 < a1
    return a0 < b1 and b0 < a1


def _overlapping(edits: list[TextEdit]) -> bool:
    return any(overlap(a, b) for i, a in enumerate(edits) for b in edits[i + 1 :])


def _next(chain: _Pending, verdict: Verdict, result: FileResult, read: Read, seen: set[tuple[str, tuple[tuple[str, str], ...]]], own: str, originals: dict[str, str]) -> list[_Pending]:
    """The chain and a fix of the edited export's new diagnostic of the same code."""
    texts = {**originals, **dict(chain.texts)}
    out = []
    for d in verdict.diagnostics:
        if d.code != chain.code or d.target != chain.target:
            continue
        file = os.path.realpath(d.path) if d.path else own
        local = dict(texts)
        for fix in _proposals(replace(result, diagnostics=verdict.diagnostics), d, local, read, own):
            edited = _edited(local, fix, file, read)
            if edited is None:
                continue
            changed = tuple(sorted((p, t) for p, t in edited.items() if t != originals.get(p)))
            if (chain.target, changed) in seen:
                continue
            seen.add((chain.target, changed))
            # One fix now, made of the chain's edits: not its members' (a together
            # trial's), nor its first fix's alone, which would leave this one out.
            out.append(replace(chain, titles=(*chain.titles, fix.title), preferred=chain.preferred and fix.preferred, texts=changed, edits=(), members=()))
    return out


def _offer(chain: _Pending, verdict: Verdict, originals: dict[str, str]) -> Offered:
    if len(chain.titles) == 1 and chain.edits:
        edits = chain.edits  # one fix: its own edits, as small as it made them
    else:
        edits = tuple(e for path, text in chain.texts for e in diff_edits(originals.get(path, ""), text, path))
    title = "; then ".join(chain.titles)
    preferred = chain.preferred and verdict.status == "kept" and not verdict.detail
    if verdict.status == "changed":
        title = f"{title} (changes the outputs: {verdict.detail})"
    elif verdict.detail:  # kept, with a caveat (random outputs)
        title = f"{title} ({verdict.detail})"
    return Offered(Fix(title, chain.diagnostic, edits, preferred), verdict.status, verdict.detail)
