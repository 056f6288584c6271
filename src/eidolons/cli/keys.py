"""``eidolons keys ACTION``: signing keys and the project's trust store (ADR 0011).

Exit codes: 0 done, 2 usage or a malformed trust store / key / registry, 3 refused (an
unsafe key file; ``register`` with no key of the project's on this host)."""

from __future__ import annotations

import argparse
import base64
import binascii
import hashlib
import json
import re
import time
from pathlib import Path
from typing import Any

from eidolons.cli.common import fail, print_json
from eidolons.ecl.events import utc_now
from eidolons.errors import EidolonsError, UsageError
from eidolons.io.config import find_root
from eidolons.io.files import atomic_write, read_bytes
from eidolons.io.paths import realpath
from eidolons.keys import lifecycle
from eidolons.keys.host import KeyFileError, default_key_file, env_key_file, register
from eidolons.keys.store import (
    ORCHESTRATOR,
    UPGRADE,
    TrustedKey,
    TrustStore,
    load_trust_store,
    pin,
    pins_path,
    read_pins,
    trust_store_path,
    valid_project,
    valid_role,
)

HELP = "manage signing keys and the project's trust store (.eidolons/trust.json)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="keys_command", metavar="ACTION", required=True)

    def action(name: str, text: str) -> argparse.ArgumentParser:
        a = sub.add_parser(name, help=text, description=text)
        a.add_argument("--root", metavar="DIR")
        a.add_argument("--json", action="store_true", help="print the result as JSON")
        return a

    init = action("init", "create a signing key outside the project and trust it (idempotent)")
    init.add_argument(
        "--role", default="orchestrator", help="orchestrator (default) or sender:EIDOLON"
    )
    init.add_argument("--not-after", metavar="WHEN", help="expiry: RFC 3339 UTC time or 90d/24h")
    action(
        "register",
        "register this project at this path for the orchestrator key on this host (the key "
        "signs only for registered roots; a moved project's registration moves here)",
    )
    action("list", "list the trusted keys and their status")
    add = action("add", "trust a public key (a file from `keys export`, PEM, or base64)")
    add.add_argument("public_key", metavar="PUBLIC_KEY")
    add.add_argument("--role", required=True, help="orchestrator or sender:EIDOLON")
    add.add_argument("--not-after", metavar="WHEN")
    add.add_argument(
        "--project",
        metavar="ID",
        action="append",
        help="an orchestrator key: a project whose receipts it is trusted for (repeatable; "
        "default this project; a key already trusted gains the projects)",
    )
    revoke = action("revoke", "revoke a key: its signatures are refused from now on")
    revoke.add_argument("keyid", metavar="KEYID")
    revoke.add_argument("--reason", default="revoked")
    rotate = action("rotate", "create a new key for a role and revoke the role's current keys")
    rotate.add_argument("--role", default="orchestrator")
    rotate.add_argument("--not-after", metavar="WHEN")
    export = action("export", "print a key's public half (base64), for `keys add` elsewhere")
    export.add_argument("keyid", metavar="KEYID")
    show = action("show", "show one key")
    show.add_argument("keyid", metavar="KEYID")
    action("pin", "pin this project's trust store on this host (a store copied in by hand)")
    action("unpin", "forget this host's pin of the project's trust store")
    req = action("require-signature", "require sender signatures on an edge (--off: stop)")
    req.add_argument("sender", metavar="FROM", help="sender eidolon or *")
    req.add_argument("receiver", metavar="TO", help="receiver eidolon or *")
    req.add_argument("--off", action="store_true")


def run(args: argparse.Namespace) -> int:
    try:
        return ACTIONS[args.keys_command](args, find_root(args.root))
    except (KeyFileError, lifecycle.RegistrationRefused, UsageError) as exc:
        return fail(exc)
    except EidolonsError as exc:
        return fail(exc, 2)


def _when(raw: str | None, now: str) -> str | None:
    if raw is None:
        return None
    m = re.fullmatch(r"(\d+)([dh])", raw)
    if m:
        seconds = int(m.group(1)) * (86400 if m.group(2) == "d" else 3600)
        base = time.mktime(time.strptime(now[:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(base + seconds))
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z", raw):
        return raw
    raise UsageError(f"--not-after {raw!r}: give an RFC 3339 UTC time (…Z) or Nd / Nh")


def _role(raw: str) -> str:
    if not valid_role(raw):
        raise UsageError(f"--role {raw!r}: orchestrator or sender:EIDOLON")
    return raw


def _store(root: Path, create: bool = False) -> TrustStore:
    if create:
        return lifecycle.open_store(root)  # a new store names a new project
    store = load_trust_store(root)
    if store is None:
        path = trust_store_path(root)
        raise UsageError(f"no trust store at {path} (run `eidolons keys init`)")
    return store


def _describe(key: TrustedKey, now: str) -> dict[str, Any]:
    out = key.to_dict()
    out["status"] = key.status(now)
    private = env_key_file(key.role) or default_key_file(key.keyid)
    out["private_key"] = str(private) if private.exists() else None
    return out


def _emit(args: argparse.Namespace, doc: Any, text: str) -> int:
    if args.json:
        print_json(doc)
    else:
        print(text)
    return 0


def _init(args: argparse.Namespace, root: Path) -> int:
    now = utc_now()
    doc = lifecycle.init_role(root, _role(args.role), not_after=_when(args.not_after, now), now=now)
    role, keyid = doc["role"], doc["keyid"]
    if doc["status"] == "exists":
        text = f"{role} key {keyid[:16]} already set up ({doc['private_key']})"
    elif doc["status"] == "no-private-key":
        text = f"note: {doc['note']}; this host can verify but not sign"
    else:
        text = (
            f"created {role} key {keyid[:16]}\n  private: {doc['private_key']}\n"
            f"  trusted in: {doc['trust_store']}"
        )
    if doc.get("upgraded"):
        text += f"\n  upgraded the trust store: it names project {doc['project']}"
    if doc.get("registered") is True:
        text += f"\n  registered project {doc['project']} at {root} for this key"
    elif doc.get("registered") is False:
        text += f"\nnote: {doc['note']}"
    return _emit(args, doc, text)


def _register(args: argparse.Namespace, root: Path) -> int:
    doc = lifecycle.register_root(root, utc_now())
    text = f"registered project {doc['project']} at {doc['root']} for key {doc['keyid'][:16]}"
    if doc["moved_from"]:
        text += f" (moved from {doc['moved_from']}, which no longer signs)"
    return _emit(args, doc, text)


def _list(args: argparse.Namespace, root: Path) -> int:
    now = utc_now()
    store = _store(root, create=True)
    keys = [_describe(k, now) for k in store.keys]
    if args.json:
        doc = {
            "trust_store": str(trust_store_path(root)),
            "project": store.project,
            "keys": keys,
            "require_sender_signature": store.require_sender_signature,
        }
        return _emit(args, doc, "")
    if store.project:
        print(f"project {store.project}")
    else:
        print(f"no project named in {trust_store_path(root)} (an older store: keys init)")
    if not keys:
        print(f"no keys in {trust_store_path(root)}")
    for k in keys:
        private = "private key here" if k["private_key"] else "public only"
        print(
            f"{k['keyid'][:16]}  {k['role']:<22} {k['status']:<8} created {k['created']}"
            f"  not-after {k['not_after'] or '-'}  {private}"
        )
    for edge in store.require_sender_signature:
        print(f"sender signature required on {edge}")
    return 0


def _parse_public(raw: str) -> bytes:
    path = Path(raw)
    try:
        is_file = path.is_file()
    except OSError:  # a name too long for a path: the key itself, or nothing
        is_file = False
    text = read_bytes(path) if is_file else raw.encode()
    if b"-----BEGIN PUBLIC KEY-----" in text:
        from eidolons.keys.receipts import public_from_pem

        return public_from_pem(text)
    try:
        public = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise UsageError("PUBLIC_KEY is neither a PEM public key nor base64") from None
    if len(public) != 32:
        raise UsageError("PUBLIC_KEY is not a 32-byte Ed25519 public key")
    return public


def _projects(args: argparse.Namespace, store: TrustStore, role: str) -> list[str] | None:
    """The projects an added orchestrator key is trusted for (None: a sender's key, or
    an older store's, which pins none)."""

    given = list(args.project or [])
    if role != ORCHESTRATOR:
        if given:
            raise UsageError("--project: only an orchestrator key is trusted per project")
        return None
    for project in given:
        if not valid_project(project):
            raise UsageError(f"--project {project!r}: a project id is 32 hex digits")
    if store.project is None:
        if given:
            raise UsageError(f"--project: {store.path} is an older store: {UPGRADE}")
        return None
    return given or [store.project]


def _add(args: argparse.Namespace, root: Path) -> int:
    role, now = _role(args.role), utc_now()
    store = _store(root, create=True)
    public = _parse_public(args.public_key)
    projects = _projects(args, store, role)
    key = TrustedKey(public, role, now, _when(args.not_after, now), projects=projects)
    known = store.get(key.keyid)
    if known is not None and known.role == role and projects and known.projects is not None:
        new = [p for p in projects if p not in known.projects]
        if not new:
            raise UsageError(f"key {key.keyid[:16]} is already trusted for {', '.join(projects)}")
        known.projects += new  # a key already trusted, for more projects
        store.save(root)
        text = f"trusted {role} key {key.keyid[:16]} for project {', '.join(new)} too"
        return _emit(args, _describe(known, now), text)
    store.add(key)
    store.save(root)
    return _emit(args, _describe(key, now), f"trusted {role} key {key.keyid[:16]}")


def _revoke(args: argparse.Namespace, root: Path) -> int:
    now = utc_now()
    store = _store(root)
    key = store.find(args.keyid)
    if key.revoked is not None:
        raise UsageError(f"key {key.keyid[:16]} was revoked at {key.revoked}")
    key.revoked = now
    key.extra["revoked_reason"] = args.reason
    store.save(root)
    return _emit(args, _describe(key, now), f"revoked {key.role} key {key.keyid[:16]} at {now}")


def _rotate(args: argparse.Namespace, root: Path) -> int:
    role, now = _role(args.role), utc_now()
    store = _store(root, create=True)
    old = store.active(role, now)
    explicit = env_key_file(role)
    if explicit is not None and explicit.exists():
        raise UsageError(f"rotate creates a new key; {explicit} exists (unset its variable)")
    signer, path = lifecycle.new_key(store, role, root, _when(args.not_after, now), now)
    for key in old:
        key.revoked = now
        key.extra["revoked_reason"] = "rotated"
    store.save(root)
    if role == ORCHESTRATOR and store.project:  # the new key signs for this root, here
        register(signer.keyid, store.project, root, now)
    doc = {
        "keyid": signer.keyid,
        "role": role,
        "private_key": str(path),
        "revoked": [k.keyid for k in old],
    }
    lines = [f"created {role} key {signer.keyid[:16]} ({path})"]
    lines += [f"revoked {k.keyid[:16]} (rotated)" for k in old]
    return _emit(args, doc, "\n".join(lines))


def _export(args: argparse.Namespace, root: Path) -> int:
    key = _store(root).find(args.keyid)
    public = key.to_dict()["public_key"]
    return _emit(args, {"keyid": key.keyid, "role": key.role, "public_key": public}, public)


def _show(args: argparse.Namespace, root: Path) -> int:
    print_json(_describe(_store(root).find(args.keyid), utc_now()))  # the text is the JSON too
    return 0


def _require(args: argparse.Namespace, root: Path) -> int:
    for name in (args.sender, args.receiver):
        if name != "*" and not re.fullmatch(r"[a-z][a-z0-9-]*", name):
            raise UsageError(f"{name!r} is not an eidolon slug or *")
    store = _store(root, create=True)
    edge = f"{args.sender}->{args.receiver}"
    edges = set(store.require_sender_signature)
    if args.off:
        edges.discard(edge)
    else:
        edges.add(edge)
    store.require_sender_signature = sorted(edges)
    store.save(root)
    state = "no longer required" if args.off else "required"
    return _emit(
        args,
        {
            "edge": edge,
            "required": not args.off,
            "require_sender_signature": store.require_sender_signature,
        },
        f"sender signature {state} on {edge}",
    )


def _pin(args: argparse.Namespace, root: Path) -> int:
    path = trust_store_path(root)
    try:
        data = read_bytes(path)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    TrustStore.parse(data, path)  # only a store that parses is pinned
    where = pin(root, data, utc_now())
    digest = hashlib.sha256(data).hexdigest()
    doc = {"trust_store": str(path), "trust_sha256": digest, "pins": str(where)}
    return _emit(args, doc, f"pinned {path} ({digest[:16]}) in {where}")


def _unpin(args: argparse.Namespace, root: Path) -> int:
    projects = dict(read_pins())
    removed = projects.pop(realpath(root), None) is not None
    if removed:
        body = json.dumps({"version": 1, "projects": projects}, indent=2, sort_keys=True) + "\n"
        atomic_write(pins_path(), body.encode("utf-8"), 0o600)
    doc = {"project": str(root), "unpinned": removed}
    return _emit(args, doc, f"unpinned {root}" if removed else f"{root} was not pinned")


ACTIONS = {
    "init": _init,
    "register": _register,
    "list": _list,
    "add": _add,
    "revoke": _revoke,
    "rotate": _rotate,
    "export": _export,
    "show": _show,
    "require-signature": _require,
    "pin": _pin,
    "unpin": _unpin,
}
