"""``eidolons a2a serve`` / ``eidolons a2a send``: ECL hand-offs over the Agent2Agent
protocol (ADR 0025); the ``a2a-sdk`` is imported by these commands only
(:mod:`eidolons.hosts.a2a`)."""

from __future__ import annotations

import argparse
import os
import sys

from eidolons.cli.common import error, project_root, say

HELP = "send and receive hand-offs over A2A, the receiver gate in front of every remote agent"
#: a network server's default payload cap: the SDK holds about 13 copies of a message while
#: it parses one, so the gate's 1 GiB default would let one request take gigabytes
SERVE_PAYLOAD_BYTES = 16 * 1024 * 1024
MISSING = "the A2A SDK is not installed ({}); pip install 'eidolons[a2a]'"


def _port(text: str) -> int:
    """A TCP port, 0 to 65535 (argparse's type: anything else is its usage error)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port (0 to 65535)")
    return port


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="a2a_action", metavar="ACTION", required=True)
    serve = actions.add_parser("serve", help="serve RECEIVER's gate as an A2A agent")
    serve.add_argument("--as", dest="receiver", required=True, metavar="RECEIVER")
    serve.add_argument("--root", metavar="DIR")
    serve.add_argument("--host", default="127.0.0.1", help="default: 127.0.0.1")
    serve.add_argument("--port", type=_port, default=8047, help="default: 8047 (0: any free port)")
    serve.add_argument(
        "--max-payload-bytes",
        type=int,
        default=SERVE_PAYLOAD_BYTES,
        metavar="N",
        help="the largest payload a message may carry (default 16 MiB; never above the "
        "gate's own cap, EIDOLONS_MAX_PAYLOAD_BYTES)",
    )
    serve.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND ...")
    send = actions.add_parser("send", help="verify a hand-off here, then send it to an A2A agent")
    send.add_argument("payload", metavar="PAYLOAD", help="the payload (its envelope beside it)")
    send.add_argument("--to", required=True, metavar="URL", help="the receiver's A2A server")
    send.add_argument("--root", metavar="DIR")
    send.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        metavar="S",
        help="seconds to wait for the remote gate's answer, COMMAND included (default: 600)",
    )


def run(args: argparse.Namespace) -> int:
    try:
        import eidolons.hosts.a2a  # noqa: F401  (the SDK, or the one line naming the extra)
    except ImportError as exc:
        return error(MISSING.format(exc))
    return _serve(args) if args.a2a_action == "serve" else _send(args)


def _serve(args: argparse.Namespace) -> int:
    import socket

    import uvicorn

    from eidolons.ecl.contract import ContractSet
    from eidolons.ecl.grammar import Limits, is_slug
    from eidolons.hosts.a2a import MAX_CONNECTIONS, Receiver, build_app
    from eidolons.io.config import hmac_key
    from eidolons.io.contracts import load_contracts

    receiver = args.receiver.partition("@")[0]
    command = list(args.command)
    if command and command[0] != "--":
        return error(f"COMMAND comes after '--': eidolons a2a serve --as {receiver} -- COMMAND")
    if not is_slug(receiver):
        return error(f"--as {args.receiver!r} is not an eidolon slug")
    root = project_root(args.root)
    if isinstance(root, int):
        return root
    contracts = load_contracts(root, [])
    if isinstance(contracts, ContractSet) and not contracts.inbound(receiver):
        return error(f"--as {receiver}: no contract names {receiver} as receiver")
    limits = Limits.from_env(os.environ)
    if args.max_payload_bytes < 1:
        return error(f"--max-payload-bytes {args.max_payload_bytes}: at least 1")
    limits.max_payload_bytes = min(limits.max_payload_bytes, args.max_payload_bytes)
    gate = Receiver(receiver, root, command=command[1:], key=hmac_key(), limits=limits)
    try:
        sock = socket.create_server((args.host, args.port))
    except OSError as exc:
        return error(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}")
    port = sock.getsockname()[1]
    url = f"http://{args.host}:{port}/"
    say(f"eidolons a2a: {receiver}'s receiver gate at {url} (card: .well-known/agent-card.json)")
    config = uvicorn.Config(
        build_app(gate, url), log_level="warning", limit_concurrency=MAX_CONNECTIONS
    )
    server = uvicorn.Server(config)
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:
        return 0
    finally:
        sock.close()
    return 0


def _send(args: argparse.Namespace) -> int:
    import asyncio

    import httpx
    from a2a.client.errors import A2AClientError, A2AClientTimeoutError, AgentCardResolutionError
    from a2a.utils.errors import A2AError

    from eidolons._text import printable
    from eidolons.ecl.grammar import Limits
    from eidolons.errors import InputError, UsageError
    from eidolons.gates.orchestrator import run_gate, text_line
    from eidolons.hosts.a2a import SIDECARS, Declined, send
    from eidolons.io import paths as pathstr
    from eidolons.io.config import hmac_key
    from eidolons.io.payload import Sidecars, envelope_of, read_envelope_bytes

    if not args.timeout > 0:  # before the gate runs: a usage error records nothing
        return error(f"--timeout {args.timeout}: a number of seconds above 0")
    try:
        url = httpx.URL(args.to)
        host = url.host  # decoded from IDNA here: a malformed A-label raises
    except (httpx.InvalidURL, UnicodeError) as exc:
        return error(f"--to {printable(args.to)}: not a URL ({printable(str(exc))})")
    if url.scheme not in ("http", "https") or not host:
        return error(f"--to {printable(args.to)}: an http:// or https:// URL of the server")
    root = project_root(args.root)
    if isinstance(root, int):
        return root
    payload = pathstr.pure(args.payload)
    try:
        limits = Limits.from_env(os.environ)
        envelope = envelope_of(payload)
        if envelope is None or envelope == payload:
            return error(f"{payload}: no envelope beside it (eidolons emit writes one)")
        data = read_envelope_bytes(envelope, limits.max_envelope_bytes, root)
    except (InputError, UsageError) as exc:
        return error(str(exc))
    # the orchestrator gate first, as `run --verify` runs it: only bytes it passed are sent
    outcome = run_gate(
        envelope, root=root, mode="block", key=hmac_key(), limits=limits, keep_payload=True,
        envelope_bytes=data, command="a2a send",
    )  # fmt: skip
    say(text_line(outcome))
    digest = outcome.result.digest
    if outcome.exit_code != 0 or not outcome.result or digest is None or digest.data is None:
        say("eidolons a2a send: the orchestrator gate did not pass it: nothing sent")
        return 3
    beside = Sidecars(envelope)  # the receipt the gate just kept, any sender signature
    try:
        sidecars = {
            suffix: beside.bytes(suffix, cap)
            for suffix, cap in SIDECARS.values()
            if beside.exists(suffix)
        }
    except InputError as exc:
        return error(str(exc))
    name = pathstr.name(outcome.result.envelope.artifact_path or payload)  # type: ignore[union-attr]
    try:
        answer = asyncio.run(
            asyncio.wait_for(send(args.to, bytes(digest.data), name, data, sidecars), args.timeout)
        )
    except Declined as exc:
        say(f"eidolons a2a send: {exc}")
        return 3
    except (TimeoutError, httpx.TimeoutException, A2AClientTimeoutError):
        return error(
            f"no answer from {printable(args.to)} within {args.timeout:g} s (--timeout)", 70
        )
    except (httpx.HTTPError, OSError, AgentCardResolutionError) as exc:
        why = printable(f"{exc.__class__.__name__}: {exc}")  # may quote the server's words
        return error(f"cannot reach {printable(args.to)}: {why}", 70)
    except (A2AClientError, A2AError) as exc:  # the server's refusal of the request itself
        return error(f"{printable(args.to)} refused the request: {printable(str(exc))}", 3)
    # the remote gate's words, escaped: the server is another host
    say(*(printable(line) for line in answer.lines))
    if answer.output is not None:
        sys.stdout.buffer.write(answer.output)
        sys.stdout.flush()
    return {"completed": 0, "rejected": 3}.get(answer.state, 70)
