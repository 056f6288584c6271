"""A key's life, as library calls (``eidolons keys`` and ``eidolons init`` call these).

:func:`init_role` is idempotent: a reachable key for the role is reused; on a host whose
trust store lists the orchestrator's key without holding its private half (a receiver's
host) nothing is minted; otherwise a key is created outside the project and trusted (the
store saved and pinned on this host, ADR 0036).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eidolons.keys.store import TrustedKey, TrustStore, load_trust_store, trust_store_path


def open_store(root: Path) -> TrustStore:
    """The project's trust store, or a new empty one (not yet saved)."""
    store = load_trust_store(root)
    return store if store is not None else TrustStore(trust_store_path(root))


def new_key(store: TrustStore, role: str, root: Path, not_after: str | None, now: str) -> Any:
    """Create the role's signer: at the role's environment file if it is set and absent
    (or use it if present), else in the key directory; trust it. Returns (signer, path)."""
    from eidolons.keys.crypto import Signer
    from eidolons.keys.files import check_location, default_key_file, env_key_file, write_key_file
    from eidolons.keys.signer import load_signer_file

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
        store.add(TrustedKey(signer.public_raw, role, now, not_after))
    return signer, path


def init_role(
    root: Path, role: str = "orchestrator", *, not_after: str | None = None, now: str | None = None
) -> dict[str, Any]:
    """``eidolons keys init`` as a call. Returns ``{status: created|exists|no-private-key,
    role, keyid, private_key, trust_store[, note]}``. Raises ``TrustStoreError`` (a broken
    or unpinned store), ``KeyFileError`` (an unsafe key file: never used), ``UsageError``."""
    from eidolons.ecl.events import utc_now
    from eidolons.errors import UsageError
    from eidolons.keys.files import default_key_file, env_key_file
    from eidolons.keys.signer import NoSigner, find_signer
    from eidolons.keys.store import valid_role

    if not valid_role(role):
        raise UsageError(f"--role {role!r}: orchestrator or sender:EIDOLON")
    now = now or utc_now()
    store = open_store(root)
    doc: dict[str, Any] = {"role": role, "trust_store": str(store.path)}
    try:
        signer = find_signer(store, role, root, now)
        path = env_key_file(role) or default_key_file(signer.keyid)
        doc.update(status="exists", keyid=signer.keyid, private_key=str(path))
        return doc
    except NoSigner as exc:
        if role == "orchestrator" and store.active(role, now) and env_key_file(role) is None:
            # a receiver-only host: the orchestrator's key lives elsewhere; never mint a rival
            doc.update(status="no-private-key", keyid=store.active(role, now)[0].keyid)
            doc.update(private_key=None, note=str(exc))
            return doc
    signer, path = new_key(store, role, root, not_after, now)
    store.save(root, now)
    doc.update(status="created", keyid=signer.keyid, private_key=str(path))
    return doc
