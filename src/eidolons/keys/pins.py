"""Host pins of project trust stores (ADR 0036): deleting or rewriting ``trust.json``
must not downgrade a signed project. Every change by ``eidolons keys`` (or ``keys pin``)
records the store's SHA-256 in the host's ``pins.json``; with a pin, a missing store or
one of other bytes is refused, and so is a pins file that cannot be read.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from typing import Any

    from eidolons.io.paths import StrPath

PINS_FILE = "pins.json"


def pins_path(env: dict[str, str] | None = None) -> str:
    from eidolons.io import paths as pathstr
    from eidolons.io.project import config_dir

    return pathstr.join(config_dir(env), PINS_FILE)


def _project_key(root: StrPath) -> str:
    return os.path.realpath(root)


def read_pins() -> dict[str, Any]:
    """The pins, ``{}`` when there is no pins file; raises ``TrustStoreError`` otherwise."""
    from eidolons.keys.files import read_host_json
    from eidolons.keys.store import TrustStoreError

    path = pins_path()
    doc = read_host_json(path, TrustStoreError, "the trust pins")
    if doc is None:
        return {}
    projects = doc.get("projects") if isinstance(doc, dict) else None
    if not isinstance(projects, dict):
        raise TrustStoreError(f"the trust pins {path} have no projects table")
    return projects


def pinned(root: StrPath) -> str | None:
    """The pinned SHA-256 of this project's trust store on this host, if any."""
    from eidolons.keys.store import TrustStoreError

    entry = read_pins().get(_project_key(root))
    if entry is None:
        return None
    value = entry.get("trust_sha256") if isinstance(entry, dict) else None
    if not isinstance(value, str):
        raise TrustStoreError(f"the trust pin of {root} in {pins_path()} is malformed")
    return value


def pin(root: StrPath, data: bytes, now: str) -> str:
    """Record ``data`` (the trust store's exact bytes) as this project's trust store."""
    from eidolons.ecl.integrity import sha256_hex
    from eidolons.keys.files import write_host_json

    projects = dict(read_pins())
    projects[_project_key(root)] = {"trust_sha256": sha256_hex(data), "pinned": now}
    write_host_json(path := pins_path(), {"version": 1, "projects": projects})
    return path


def check(root: StrPath, data: bytes | None) -> str | None:
    """Why the trust store (``data``, None when absent) is refused, or None."""
    expected = pinned(root)
    if expected is None:
        return None
    if data is None:
        return (
            f"this host pinned a trust store for {root} ({pins_path()}) and it is gone: a "
            "signed project is never downgraded to unsigned (restore it, or `eidolons keys "
            "unpin` as the operator)"
        )
    from eidolons.ecl.integrity import sha256_hex

    if sha256_hex(data) != expected:
        return (
            f"the trust store of {root} differs from the one this host pinned: changed "
            "outside `eidolons keys` (run `eidolons keys pin` as the operator to accept it)"
        )
    return None
