"""DSSE: the specification's test vectors, pinned verbatim (protocol.md v1.0.0 and
testvectors/vectors.json of secure-systems-lab/dsse), and cryptography kept off the
commands that need no signature."""

from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path

import pytest

from eidolons.keys.receipts import DsseError, b64decode_any, pae, verify_envelope

IN_TOTO = "application/vnd.in-toto+json"
STATEMENT_B64 = "eyJfdHlwZSI6Imh0dHBzOi8vaW4tdG90by5pby9TdGF0ZW1lbnQvdjEifQ=="
KEY_A_SEED = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"
KEY_A = bytes.fromhex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
KEY_B = bytes.fromhex("3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c")
SIG_A = "2WAfaHm5jluo0w+0rk8uVkluELJYWjSmU9x7EUzx+AyteDGJ4/nqyJXfmAUVFIAoQafWm7AxBZNw5M9ixNHiCA=="
SIG_B = "c1+67/aT0yqEpwx8PsVY3MLHsj9D0CZ014/Fv/QlG59P+9CobUZ7xECJ/V3USG0Ob9CiE5LjReEZUzNF2l7eBw=="
PAE_STATEMENT = (
    "445353457631203238206170706c69636174696f6e2f766e642e696e2d746f746f2b6a736f6e2034"
    "33207b225f74797065223a2268747470733a2f2f696e2d746f746f2e696f2f53746174656d656e74"
    "2f7631227d"
)


def test_protocol_pae_example() -> None:
    assert pae(b"http://example.com/HelloWorld", b"hello world") == (
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )


def test_protocol_ecdsa_example_verifies_over_our_pae() -> None:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, utils

    numbers = ec.EllipticCurvePublicNumbers(
        46950820868899156662930047687818585632848591499744589407958293238635476079160,
        5640078356564379163099075877009565129882514886557779369047442380624545832820,
        ec.SECP256R1(),
    )
    raw = base64.b64decode(
        "A3JqsQGtVsJ2O2xqrI5IcnXip5GToJ3F+FnZ+O88SjtR6rDAajabZKciJTfUiHqJPcIAriEGAHTVeCUjW2JIZA=="
    )
    der = utils.encode_dss_signature(int.from_bytes(raw[:32]), int.from_bytes(raw[32:]))
    message = pae(b"http://example.com/HelloWorld", base64.b64decode("aGVsbG8gd29ybGQ="))
    numbers.public_key().verify(der, message, ec.ECDSA(hashes.SHA256()))  # raises if not


@pytest.mark.parametrize(
    ("ptype", "body", "expected"),
    [
        (IN_TOTO, base64.b64decode(STATEMENT_B64), PAE_STATEMENT),
        (IN_TOTO, b"", PAE_STATEMENT[:78] + "3020"),
        (
            "application/vnd.exämple+json",
            base64.b64decode(STATEMENT_B64),
            "445353457631203239206170706c69636174696f6e2f766e642e6578c3a46d706c652b6a736f6e2034"
            "33207b225f74797065223a2268747470733a2f2f696e2d746f746f2e696f2f53746174656d656e74"
            "2f7631227d",
        ),
    ],
)  # fmt: skip
def test_vector_pae(ptype: str, body: bytes, expected: str) -> None:
    assert pae(ptype.encode("utf-8"), body).hex() == expected


def _env(payload: str, ptype: str, *sigs: tuple[str | None, str]) -> dict[str, object]:
    signatures = [{"sig": s} if k is None else {"keyid": k, "sig": s} for k, s in sigs]
    return {"payload": payload, "payloadType": ptype, "signatures": signatures}


def test_vector_single_signature_accept() -> None:
    body, accepted = verify_envelope(
        _env(STATEMENT_B64, IN_TOTO, ("A", SIG_A)), {"A": KEY_A}, [IN_TOTO]
    )
    assert accepted == ["A"] and body == base64.b64decode(STATEMENT_B64)


def test_vector_url_safe_base64_accept() -> None:
    sig = "P-_KHICeR7tI6S_YyejJTRtrXhcQyQ2LYPaL8h90KjC9qN8HU_svOQ6TuDOT1HIrsGW886DbWNWcCmX5twLrAw=="
    body, accepted = verify_envelope(_env("-_-_Pj8=", IN_TOTO, ("A", sig)), {"A": KEY_A}, [IN_TOTO])
    assert accepted == ["A"] and body == bytes.fromhex("fbffbf3e3f")


def test_vector_payload_type_swapped_reject() -> None:
    other = "application/vnd.example.other+json"
    env = _env(STATEMENT_B64, other, ("A", SIG_A))
    assert verify_envelope(env, {"A": KEY_A}, [IN_TOTO, other])[1] == []


def test_vector_threshold_two_distinct_keys() -> None:
    env = _env(STATEMENT_B64, IN_TOTO, (None, SIG_A), (None, SIG_B))
    assert sorted(verify_envelope(env, {"A": KEY_A, "B": KEY_B}, [IN_TOTO])[1]) == ["A", "B"]
    twice = _env(STATEMENT_B64, IN_TOTO, ("A", SIG_A), ("A", SIG_A))
    assert verify_envelope(twice, {"A": KEY_A, "B": KEY_B}, [IN_TOTO])[1] == ["A"]


def test_keyid_hint_never_selects_a_key() -> None:
    env = _env(STATEMENT_B64, IN_TOTO, ("B", SIG_A))  # lies about its key: A still verifies
    assert verify_envelope(env, {"B": KEY_B}, [IN_TOTO])[1] == []
    assert verify_envelope(env, {"A": KEY_A}, [IN_TOTO])[1] == ["A"]


def test_our_signer_reproduces_the_vector() -> None:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from eidolons.keys.receipts import Signer, sign_envelope

    signer = Signer(Ed25519PrivateKey.from_private_bytes(bytes.fromhex(KEY_A_SEED)))
    assert signer.public_raw == KEY_A
    env = sign_envelope(IN_TOTO, base64.b64decode(STATEMENT_B64), signer)
    assert env["payload"] == STATEMENT_B64 and env["signatures"][0]["sig"] == SIG_A


@pytest.mark.parametrize(
    "doc",
    [
        [],
        {"payload": STATEMENT_B64, "payloadType": IN_TOTO, "signatures": []},
        {"payload": "%%%", "payloadType": IN_TOTO, "signatures": [{"sig": SIG_A}]},
        {"payload": STATEMENT_B64, "payloadType": IN_TOTO, "signatures": [{"sig": 1}]},
        {"payload": STATEMENT_B64, "payloadType": IN_TOTO, "signatures": [{"sig": SIG_A}], "x": 1},
    ],
)
def test_malformed_dsse_is_an_error(doc: object) -> None:
    with pytest.raises(DsseError):
        verify_envelope(doc, {"A": KEY_A}, [IN_TOTO])


def test_b64_any_alphabet() -> None:
    assert b64decode_any("-_-_Pj8=") == b64decode_any("+/+/Pj8=") == bytes.fromhex("fbffbf3e3f")


NO_CRYPTO = [
    ["--help"],
    ["keys", "--help"],
    ["contracts", "list"],
    ["trace", "show", "nothing"],
    ["verify-envelope", "missing.envelope.json", "--mode", "warn"],
    ["verify-incoming", "plain.md", "--as", "vigil"],
    ["check", "missing.envelope.json"],
]


def test_commands_that_need_no_signature_do_not_import_cryptography(tmp_path: object) -> None:
    """Start-up cost and attack surface: only signing and verifying load cryptography."""
    code = (
        "import sys, contextlib, io\n"
        "from eidolons.cli.main import main\n"
        f"for argv in {NO_CRYPTO!r}:\n"
        "    out, err = io.StringIO(), io.StringIO()\n"
        "    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):\n"
        "        main(argv)\n"
        "    assert not [m for m in sys.modules if m.startswith('cryptography')], argv\n"
        "print('clean')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=str(tmp_path), capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "clean", proc.stderr


def test_the_verifying_path_does_not_load_pem_serialization(tmp_path: Path) -> None:
    """A receiver verifying receipts imports Ed25519 only: ``serialization`` (PEM, SSH,
    bcrypt, ciphers) costs more than the rest of the check and is for key files."""
    from tests.conftest import clean_env

    project = tmp_path / "proj"
    (project / ".eidolons").mkdir(parents=True)
    env = clean_env(XDG_CONFIG_HOME=str(tmp_path / "cfg"))
    payload = project / "r.md"
    payload.write_text("# r\n")
    steps = [
        ["keys", "init"],
        ["emit", str(payload), "--from", "atlas", "--to", "vigil", "--performative", "INFORM",
         "--kind", "scout-report", "--objective", "o"],
        ["verify-envelope", str(project / "r.envelope.json"), "--block"],
    ]  # fmt: skip
    for argv in steps:
        assert subprocess.run([sys.executable, "-m", "eidolons", *argv], cwd=project, env=env,
                              capture_output=True, timeout=60).returncode == 0  # fmt: skip
    code = (
        "import sys, contextlib, io\n"
        "from eidolons.cli.main import main\n"
        "with contextlib.redirect_stderr(io.StringIO()):\n"
        f"    argv = ['verify-incoming', {str(payload)!r}, '--as', 'vigil', '--no-memory']\n"
        "    assert main(argv) == 0\n"
        # the receipt was verified by cryptography (its Rust classes, ADR 0022)
        "assert 'cryptography.hazmat.bindings._rust' in sys.modules\n"
        "assert 'cryptography.hazmat.primitives.asymmetric.ed25519' not in sys.modules\n"
        "assert 'cryptography.hazmat.primitives.serialization' not in sys.modules\n"
        "print('lean')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=project, env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.stdout.strip() == "lean", proc.stderr
