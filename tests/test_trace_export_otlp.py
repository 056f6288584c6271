"""``eidolons trace export --otlp URL``: spans reach a real OTLP/HTTP receiver (started
here on 127.0.0.1, decoding the protobuf with the ``opentelemetry-proto`` messages), with
GenAI attributes, ``ecl.*`` attributes and ids derived from the ECL ids."""

from __future__ import annotations

import gzip
import hashlib
import http.server
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # a [dev] dependency
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tests.conftest import Run, clean_env
from tests.test_trace_chain import IDS, THREAD, build_chain

Cli = Callable[..., Run]


class Receiver:
    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        self.paths: list[str] = []
        self.status = 200
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                outer.paths.append(self.path)
                if outer.status == 200:
                    request = ExportTraceServiceRequest()
                    request.ParseFromString(body)
                    outer.requests.append(request)
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(outer.status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def spans(self) -> list[Any]:
        return [
            span
            for req in self.requests
            for rs in req.resource_spans
            for ss in rs.scope_spans
            for span in ss.spans
        ]


@pytest.fixture(scope="session")
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.server.shutdown()
    r.server.server_close()


@pytest.fixture
def otlp(receiver: Receiver) -> Receiver:
    receiver.requests.clear()
    receiver.paths.clear()
    receiver.status = 200
    return receiver


def attrs(kv: Any) -> dict[str, Any]:
    out = {}
    for a in kv:
        v = a.value
        out[a.key] = getattr(v, v.WhichOneof("value"))
    return out


def chain_on_record(cli: Cli, project: Path) -> None:
    envelopes = build_chain(cli, project)
    for envelope in envelopes:
        assert cli("verify-envelope", envelope, "--block").code == 0
    (project / "handoffs" / "m-spec.md").write_text("rewritten in transit\n")
    assert cli("verify-incoming", project / "handoffs" / "m-spec.md", "--as", "apivr").code == 3


def test_one_span_per_hand_off_with_genai_and_ecl_attributes(
    cli: Cli, project: Path, otlp: Receiver
) -> None:
    chain_on_record(cli, project)
    r = cli("trace", "export", "--otlp", otlp.url, "handoffs", "--timeout", "5")
    assert r.code == 0, r.err
    assert "exported 3 spans" in r.err and otlp.paths == ["/v1/traces"]
    spans = otlp.spans()
    assert len(spans) == 3
    resource = attrs(otlp.requests[0].resource_spans[0].resource.attributes)
    assert resource["service.name"] == "eidolons"
    by_id = {s.span_id: s for s in spans}
    want = {mid: hashlib.sha256(f"ecl.message_id:{mid}".encode()).digest()[:8] for mid in IDS}
    assert set(by_id) == set(want.values())
    assert {s.trace_id for s in spans} == {bytes.fromhex(THREAD.replace("-", ""))}
    first, second, third = (by_id[want[m]] for m in IDS)
    assert first.parent_span_id == b""
    assert second.parent_span_id == first.span_id and third.parent_span_id == second.span_id
    a = attrs(second.attributes)
    assert second.name == "invoke_agent spectra"
    assert a["gen_ai.operation.name"] == "invoke_agent" and a["gen_ai.agent.name"] == "spectra"
    assert a["gen_ai.conversation.id"] == THREAD and a["gen_ai.usage.output_tokens"] == 1200
    assert a["ecl.message_id"] == IDS[1] and a["ecl.to"] == "apivr"
    assert a["ecl.verdict"] == "pass"  # the orchestrator passed it before the rewrite
    assert a["ecl.failure_code"] == "INTEGRITY_MISMATCH"  # the receiver then refused it
    assert a["ecl.receiver.decision"] == "refused"
    assert a["ecl.evidence"] == "unsigned" and a["ecl.receipt"] == "none"  # no trust store
    assert second.status.code == 2  # STATUS_CODE_ERROR
    events = [(e.name, attrs(e.attributes)) for e in second.events]
    assert [(n, x["ecl.gate"]) for n, x in events] == [
        ("ecl.verify_pass", "orchestrator"),
        ("ecl.verify_fail", "receiver"),
    ]
    assert events[0][1]["ecl.evidence"] == "unsigned"
    assert events[1][1]["ecl.failure_code"] == "INTEGRITY_MISMATCH"
    assert "ecl.reason" in events[1][1] and isinstance(events[1][1]["ecl.duration_ms"], int)
    assert first.status.code == 1 and attrs(first.attributes)["ecl.verdict"] == "pass"
    assert second.start_time_unix_nano <= second.end_time_unix_nano


def test_a_probe_by_another_receiver_leaves_the_span_ok(
    cli: Cli, project: Path, otlp: Receiver
) -> None:
    from tests.conftest import emit_payload

    scout, envelope, _ = emit_payload(cli, project)  # to vigil
    assert cli("verify-envelope", envelope, "--block").code == 0
    assert cli("verify-incoming", scout, "--as", "vigil").code == 0
    assert cli("verify-incoming", scout, "--as", "forge").code == 3  # later, not its addressee
    r = cli("trace", "export", "--otlp", otlp.url, str(envelope), "--timeout", "5")
    assert r.code == 0, r.err
    (span,) = otlp.spans()
    assert span.status.code == 1  # STATUS_CODE_OK: the addressee passed it
    a = attrs(span.attributes)
    assert "ecl.failure_code" not in a and a["ecl.receiver.decision"] == "pass"
    assert [e.name for e in span.events].count("ecl.verify_fail") == 1  # the probe, shown


@pytest.mark.parametrize(
    ("suffix", "path"), [("", "/v1/traces"), ("/", "/v1/traces"), ("/otlp/spans", "/otlp/spans")]
)
def test_a_base_url_gets_the_traces_path_and_any_other_path_is_used_as_is(
    cli: Cli, project: Path, otlp: Receiver, suffix: str, path: str
) -> None:
    chain_on_record(cli, project)
    base = otlp.url.removesuffix("/v1/traces")
    r = cli("trace", "export", "--otlp", base + suffix, THREAD, "--timeout", "5")
    assert r.code == 0, r.err
    assert otlp.paths == [path] and len(otlp.spans()) == 3
    assert r.err.splitlines()[-1] == f"exported 3 spans to {base}{path}"


def test_ids_are_the_same_on_every_export(cli: Cli, project: Path, otlp: Receiver) -> None:
    chain_on_record(cli, project)
    thread_args = ("trace", "export", "--otlp", otlp.url, THREAD)
    assert cli(*thread_args).code == 0
    assert cli(*thread_args).code == 0
    first, again = (
        sorted((s.trace_id, s.span_id, s.parent_span_id) for s in rs.scope_spans[0].spans)
        for req in otlp.requests
        for rs in req.resource_spans
    )
    assert first == again and len(first) == 3


def test_every_thread_by_default(cli: Cli, project: Path, otlp: Receiver) -> None:
    chain_on_record(cli, project)
    (project / "other.md").write_text("# other\n")
    assert cli("emit", "other.md", "--from", "atlas", "--to", "vigil", "--performative",
               "INFORM", "--kind", "scout-report", "--objective", "o").code == 0  # fmt: skip
    assert cli("trace", "export", "--otlp", otlp.url).code == 0
    # three threads: the chain, other.md, and the refusal's hand-back (its own thread, one
    # REFUSE span apivr -> orchestrator; ADR 0017)
    assert len({s.trace_id for s in otlp.spans()}) == 3 and len(otlp.spans()) == 5


def test_a_refusing_or_absent_collector_exits_3(cli: Cli, project: Path, otlp: Receiver) -> None:
    chain_on_record(cli, project)
    otlp.status = 400  # not retryable: refused at once
    r = cli("trace", "export", "--otlp", otlp.url, THREAD, "--timeout", "2")
    assert r.code == 3 and "did not accept" in r.err
    r = cli("trace", "export", "--otlp", "http://127.0.0.1:9/v1/traces", THREAD, "--timeout",
            "0.5")  # fmt: skip
    assert r.code == 3
    assert cli("trace", "export", "--otlp", "file:///etc/passwd", THREAD).code == 2
    assert cli("trace", "export", "--otlp", otlp.url, "no-such-thread").code == 1
    assert cli("trace", "export", "--otlp", otlp.url, "--to", "postgres").code == 2
    r = cli("trace", "export", "--otlp", otlp.url, "--dsn", "postgresql://x/y")
    assert r.code == 2 and "--dsn" in r.err and not otlp.requests


def test_the_sdk_is_imported_only_by_export(project: Path, otlp: Receiver, cli: Cli) -> None:
    chain_on_record(cli, project)
    probe = (
        "import sys\n"
        "from eidolons.cli.main import main\n"
        "for argv in (['trace','graph','handoffs','--format','svg'], ['trace','otel','handoffs'],"
        " ['trace','report',sys.argv[1]], ['trace','list'], ['verify-envelope',"
        " 'handoffs/z-scout.envelope.json']):\n"
        "    main(argv)\n"
        "assert not [m for m in sys.modules if m.startswith('opentelemetry')], 'imported early'\n"
        "main(['trace','export','--otlp',sys.argv[2],sys.argv[1]])\n"
        "assert 'opentelemetry.sdk.trace' in sys.modules\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe, THREAD, otlp.url],
        cwd=project,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(otlp.spans()) == 3
