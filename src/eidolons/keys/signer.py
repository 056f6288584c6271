"""Finding the private key a role signs with: the role's environment file, else the key
file of the newest active key of the role in the trust store; a key the store does not
list as active signs nothing.
"""

from __future__ import annotations

import os

from eidolons.keys.crypto import KeyFormatError, Signer
from eidolons.keys.files import (
    SENDER_KEY_ENV,
    SIGNING_KEY_ENV,
    KeyFileError,
    env_key_file,
    key_file,
    read_key_file,
)
from eidolons.keys.store import TrustStore

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from eidolons.io.paths import StrPath


class NoSigner(Exception):
    """No usable key for the role; ``str()`` says why (one line)."""


def load_signer_file(path: StrPath, root: StrPath) -> Signer:
    try:
        return Signer.from_pem(read_key_file(path, root))
    except KeyFormatError as exc:
        raise KeyFileError(f"key file {path}: {exc}") from None


def find_signer(store: TrustStore, role: str, root: StrPath, now: str) -> Signer:
    """The signer for ``role``, or :class:`NoSigner` (a :class:`KeyFileError` for an unsafe
    file propagates: the caller reports it, never signs with it)."""
    active = store.active(role, now)
    explicit = env_key_file(role)
    if explicit is not None:
        if not os.path.lexists(explicit):
            raise NoSigner(f"the key file {explicit} does not exist")
        signer = load_signer_file(explicit, root)
        if signer.keyid not in {k.keyid for k in active}:
            raise NoSigner(
                f"the key in {explicit} ({signer.keyid[:16]}) is not an active {role} key "
                f"in {store.path}"
            )
        return signer
    if not active:
        raise NoSigner(f"{store.path} lists no active {role} key")
    for key in active:
        path = key_file(key.keyid)
        if os.path.exists(path):
            signer = load_signer_file(path, root)
            if signer.keyid == key.keyid:
                return signer
            raise KeyFileError(f"key file {path} holds key {signer.keyid[:16]}, not its name")
    variable = SIGNING_KEY_ENV if role == "orchestrator" else SENDER_KEY_ENV
    raise NoSigner(
        f"no private key for the active {role} key {active[0].keyid[:16]} is reachable "
        f"here ({key_file(active[0].keyid)} or ${variable})"
    )
