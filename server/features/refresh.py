"""Asking the client to request a feature's results again (``workspace/inlayHint/refresh``,
``workspace/codeLens/refresh``): after a new result, or a setting that changes what is
shown, the hints and lenses the editor holds are stale, and only the client can pull them.
A client that did not say it can be asked is not asked."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from exportlens.server.host import Host

log = logging.getLogger(__name__)

HINTS = "inlay hint"
LENSES = "code lens"


def refresh(server: Host, *features: str) -> None:
    """Ask the client to request ``features`` (:data:`HINTS`, :data:`LENSES`) again,
    each when it can be asked."""
    for feature in features:
        if feature == HINTS:
            can, request = server.client.inlay_hint_refresh, server.workspace_inlay_hint_refresh
        elif feature == LENSES:
            can, request = server.client.code_lens_refresh, server.workspace_code_lens_refresh
        else:
            raise ValueError(f"no refresh request for {feature!r}")
        if not can:
            continue
        try:
            request(None)
        except Exception:  # noqa: BLE001 - the client may be gone
            log.debug("%s refresh failed", feature, exc_info=True)
