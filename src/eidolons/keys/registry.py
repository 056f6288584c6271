"""Which projects an orchestrator key signs for on this host (ADR 0031).

A key signs only for a project its operator registered (``keys init``, ``keys register``,
``keys rotate``: :func:`register`, the one rule) at exactly this root's real path, recorded
in the host's ``projects.json`` (mode 0600), beside the keys, where agents are kept out.
:func:`signing_refusal` is the gate's one check before it signs; a registry that cannot be
read fails closed.
"""

from __future__ import annotations

import os

from eidolons.errors import EidolonsError

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from typing import Any

    from eidolons.io.paths import StrPath
    from eidolons.keys.store import TrustStore

REGISTRY_FILE = "projects.json"
REGISTER = "run `eidolons keys register` here, as the operator"


class RegistryError(EidolonsError):
    """This host's project registrations exist but cannot be read: fail closed."""

    code = "REGISTRY"


def registry_path() -> str:
    from eidolons.io import paths as pathstr
    from eidolons.io.project import config_dir

    return pathstr.join(config_dir(), REGISTRY_FILE)


def read_registry() -> dict[str, dict[str, Any]]:
    """keyid -> project id -> ``{root, registered}``; ``{}`` when there is no file."""
    from eidolons.keys.files import read_host_json

    path = registry_path()
    doc = read_host_json(path, RegistryError, "the project registrations")
    if doc is None:
        return {}
    keys = doc.get("keys") if isinstance(doc, dict) and doc.get("version") == 1 else None
    if not isinstance(keys, dict) or not all(isinstance(v, dict) for v in keys.values()):
        raise RegistryError(f"{path} is not a registry of projects (version 1, keys)")
    return keys


def registered_root(keyid: str, project: str) -> str | None:
    """The real root this host registered ``project`` at for ``keyid``, if any."""
    entry = read_registry().get(keyid, {}).get(project)
    if entry is None:
        return None
    root = entry.get("root") if isinstance(entry, dict) else None
    if not isinstance(root, str):
        raise RegistryError(f"the registration of {project} in {registry_path()} is malformed")
    return root


def register(
    keyid: str, project: str, root: StrPath, now: str, *, move: bool = True
) -> dict[str, Any]:
    """The one registration rule: register ``project`` at ``root``'s real path for
    ``keyid``. A registration at another path is moved with ``move`` (``keys register``,
    ``keys rotate``), else kept (``keys init``: ``registered`` False and a ``note``).
    Returns ``{registered, root, moved_from, registry[, note]}``."""
    from eidolons.keys.files import write_host_json

    here, before, path = os.path.realpath(root), registered_root(keyid, project), registry_path()
    doc: dict[str, Any] = {"registered": True, "root": here, "moved_from": None, "registry": path}
    if before not in (None, here):
        if not move:
            note = (
                f"this project ({project}) is registered for key {keyid[:16]} at {before}; "
                f"if it moved here, {REGISTER}"
            )
            return {**doc, "registered": False, "note": note}
        doc["moved_from"] = before
    elif before == here and not move:
        return doc
    keys = dict(read_registry())
    keys[keyid] = {**keys.get(keyid, {}), project: {"root": here, "registered": now}}
    write_host_json(path, {"version": 1, "keys": keys})
    return doc


def signing_refusal(store: TrustStore, keyid: str, root: StrPath) -> str | None:
    """Why orchestrator key ``keyid`` must not sign for the project at ``root`` (one line
    naming the command that fixes it), or None when it may."""
    from eidolons.keys.store import UPGRADE

    project = store.project
    if project is None:
        return f"the trust store {store.path} names no project (an older store): {UPGRADE}"
    key = store.get(keyid)
    if key is None or store.project_refusal(key, project) is not None:
        return (
            f"the trust store does not pin orchestrator key {keyid[:16]} for this project "
            f"({project}), so receivers would refuse its receipts (`eidolons keys add "
            "PUBLIC_KEY --role orchestrator` pins it, as the operator)"
        )
    try:
        where = registered_root(keyid, project)
    except RegistryError as exc:
        return f"the project registrations cannot be read: {exc}"
    here = os.path.realpath(root)
    if where is None:
        return (
            f"this project ({project}) is not registered for orchestrator key {keyid[:16]} "
            f"on this host, which signs only for registered roots: {REGISTER}"
        )
    if where != here:
        return (
            f"this project ({project}) is not registered here ({here}) for orchestrator key "
            f"{keyid[:16]} but at {where}: a moved or copied project signs only once "
            f"registered: {REGISTER}"
        )
    return None


def root_refusal(root: StrPath, now: str) -> str | None:
    """Why the orchestrator key this host holds for the project at ``root`` would not
    sign there (``eidolons doctor``); None when it would, when the project has no usable
    trust store (reported on its own), or when this host holds no key of it (a
    receiver's host)."""
    from eidolons.keys.signer import NoSigner, find_signer
    from eidolons.keys.store import ORCHESTRATOR, load_trust_store

    try:
        store = load_trust_store(root)
        if store is None:
            return None
        signer = find_signer(store, ORCHESTRATOR, root, now)
    except (NoSigner, EidolonsError):
        return None
    return signing_refusal(store, signer.keyid, root)
