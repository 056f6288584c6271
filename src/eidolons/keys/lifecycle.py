"""A key's life, as library calls (``eidolons keys`` and ``eidolons init`` call these).
:func:`init_role` is idempotent and never mints a rival orchestrator key on a receiver's
host; :func:`register_root` moves a registration (a moved project). ADR 0011 for pins.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eidolons.errors import EidolonsError
from eidolons.keys.store import (
    ORCHESTRATOR,
    TrustedKey,
    TrustStore,
    load_trust_store,
    new_project_id,
    trust_store_path,
)


class RegistrationRefused(EidolonsError):
    """``keys register`` has nothing it may register (exit 3: refused)."""

    code = "REGISTER"
    exit_code = 3


def open_store(root: Path) -> TrustStore:
    """The project's trust store, or a new empty one naming a new project (not saved)."""
    store = load_trust_store(root)
    if store is not None:
        return store
    return TrustStore(trust_store_path(root), project=new_project_id())


def new_key(store: TrustStore, role: str, root: Path, not_after: str | None, now: str) -> Any:
    """Create the role's signer: at the role's environment file if it is set and absent
    (or use it if present), else in the key directory; trust it (an orchestrator key for
    this store's project). Returns (signer, path)."""
    from eidolons.keys.host import check_location, default_key_file, env_key_file, write_key_file
    from eidolons.keys.receipts import Signer, load_signer_file

    explicit = env_key_file(role)
    if explicit is not None and explicit.exists():
        signer = load_signer_file(explicit, root)
        path = explicit
    else:
        signer = Signer.generate()
        path = explicit or default_key_file(signer.keyid)
        check_location(path, root)
        write_key_file(path, signer.to_pem(), root)
    if store.get(signer.keyid) is None:
        projects = [store.project] if role == ORCHESTRATOR and store.project else None
        store.add(TrustedKey(signer.public_raw, role, now, not_after, projects=projects))
    return signer, path


def init_role(
    root: Path, role: str = ORCHESTRATOR, *, not_after: str | None = None, now: str | None = None
) -> dict[str, Any]:
    """``eidolons keys init`` as a call. Returns ``{status: created|exists|no-private-key,
    role, keyid, private_key, trust_store, project[, registered, note]}``. Raises
    ``TrustStoreError`` (a broken or unpinned store), ``KeyFileError`` (an unsafe key
    file: never used), ``RegistryError``, ``UsageError``."""
    from eidolons.ecl.events import utc_now
    from eidolons.errors import UsageError
    from eidolons.keys.host import default_key_file, env_key_file
    from eidolons.keys.receipts import NoSigner, find_signer
    from eidolons.keys.store import valid_role

    if not valid_role(role):
        raise UsageError(f"--role {role!r}: orchestrator or sender:EIDOLON")
    now = now or utc_now()
    store = open_store(root)
    upgraded = store.project is None
    if upgraded:  # an older store: it names its project from now on
        store.upgrade(new_project_id())
    doc: dict[str, Any] = {"role": role, "trust_store": str(store.path), "project": store.project}
    try:
        signer = find_signer(store, role, root, now)
        path = env_key_file(role) or default_key_file(signer.keyid)
        doc.update(status="exists", keyid=signer.keyid, private_key=str(path))
    except NoSigner as exc:
        if role == ORCHESTRATOR and store.active(role, now) and env_key_file(role) is None:
            # a receiver-only host: the orchestrator's key lives elsewhere; never mint a rival
            doc.update(status="no-private-key", keyid=store.active(role, now)[0].keyid)
            doc.update(private_key=None, note=str(exc))
            if upgraded:
                store.save(root, now)
            return doc
        signer, path = new_key(store, role, root, not_after, now)
        doc.update(status="created", keyid=signer.keyid, private_key=str(path))
    if upgraded or doc["status"] == "created":
        store.save(root, now)
    if upgraded:
        doc["upgraded"] = True
    if role == ORCHESTRATOR:
        from eidolons.keys.host import register

        assert store.project is not None
        reg = register(signer.keyid, store.project, root, now, move=False)
        doc.update((k, reg[k]) for k in ("registered", "note") if k in reg)
    return doc


def register_root(root: Path, now: str | None = None) -> dict[str, Any]:
    """``eidolons keys register``: register this project at this root for the
    orchestrator key this host holds, moving a registration of it at another path (a
    moved project). Raises ``RegistrationRefused`` (no key here, an older store, a key
    the store does not pin for the project), ``TrustStoreError``, ``RegistryError``."""
    from eidolons.ecl.events import utc_now
    from eidolons.keys.host import register
    from eidolons.keys.receipts import NoSigner, find_signer
    from eidolons.keys.store import UPGRADE

    now = now or utc_now()
    store = load_trust_store(root)
    if store is None:
        path = trust_store_path(root)
        raise RegistrationRefused(f"no trust store at {path}: run `eidolons keys init`")
    if store.project is None:
        raise RegistrationRefused(f"the trust store {store.path} names no project: {UPGRADE}")
    try:
        signer = find_signer(store, ORCHESTRATOR, root, now)
    except NoSigner as exc:
        raise RegistrationRefused(f"nothing to register: {exc}") from None
    key = store.get(signer.keyid)
    assert key is not None  # find_signer returns only an active key of the store
    if store.project_refusal(key, store.project) is not None:
        raise RegistrationRefused(
            f"the trust store does not pin orchestrator key {signer.keyid[:16]} for this "
            f"project ({store.project}): `eidolons keys add PUBLIC_KEY --role orchestrator`"
        )
    reg = register(signer.keyid, store.project, root, now)
    doc = {"keyid": signer.keyid, "project": store.project}
    return doc | {k: reg[k] for k in ("root", "moved_from", "registry")}
