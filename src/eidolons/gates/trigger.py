"""The one rule for "is this path a hand-off?": it lies under a hand-off directory, or a
trace of the project (or this host's payload index) names it. The receiver gate, the
hooks and the MCP server all ask it here."""

from __future__ import annotations

from eidolons.io.config import handoff_dirs
from eidolons.io.paths import foreign_projects

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from collections.abc import Mapping

    from eidolons.io.paths import StrPath


def find_handoff(
    path: StrPath, root: StrPath, env: Mapping[str, str] | None = None, *, trace: bool = True
) -> tuple[str, dict[str, object] | None] | None:
    """Why the project knows ``path`` as a hand-off payload (and the trace event naming
    it), or None: it lies under a hand-off directory, or (``trace``) a trace event names
    it as ``payload_path``; a trace too large to search rules nothing out (fail closed).
    With ``trace``, a path another project holds (:func:`foreign_projects`) is a hand-off
    when that project's rules say so: a nested project's hand-off stays one."""
    found = _known_in(path, root, env, trace=trace)
    if found is not None or not trace:
        return found
    for other in foreign_projects(path, root):
        inner = _known_in(path, other, env, trace=True)
        if inner is not None:
            return f"{inner[0]}, in the project at {other}", inner[1]
    return None


def _known_in(
    path: StrPath, root: StrPath, env: Mapping[str, str] | None, *, trace: bool
) -> tuple[str, dict[str, object] | None] | None:
    """:func:`find_handoff` by the rules of the one project ``root``."""
    from eidolons.io.paths import lies_under

    for directory in handoff_dirs(root, env):
        if lies_under(str(path), str(directory)):  # any spelling, as written or resolved
            return f"it lies under the hand-off directory {directory}", None
    if not trace:
        return None
    from eidolons.errors import InputError
    from eidolons.io.paths import payload_keys
    from eidolons.trace.store import open_store

    keys = payload_keys(str(path), str(root))
    try:
        with open_store(root, env) as store:
            event = store.find_payload(keys)
    except InputError as exc:  # TraceReadError included: unreadable is not "absent"
        return f"the trace cannot rule it out ({exc})", None
    if event is None:
        # the host's payload index (ADR 0018): a trace of this project named it, though
        # the trace on disk no longer does (lines removed, a file cut or deleted)
        from eidolons.io.paths import named_on_host

        index = named_on_host(str(path), str(root))
        if index is None:
            return None
        return f"this host's payload index names it ({index}), the trace no longer does", None
    return (
        f"the trace names it ({event.get('event')} of message {event.get('message_id')})",
        event,
    )
