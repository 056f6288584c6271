"""Red team, second pass on the last hour of session 15 (``git log 1db0cb6..``): the host
payload index written in place, tail only (ADR 0110's amendment), the hook refusing a
receiver's own programs (ADR 0134 part 2), and ``check``'s parallel default under a
hostile environment (ADR 0115).

The adversary is an agent in the pipeline: it writes any file of the project and runs
whatever its host lets it run, but it cannot write the host's config directory nor set
the hook's environment. Each test is an attack; a hole found was written red first, then
fixed (the test says ``HOLE (fixed, ADR ...)``); the others are guards."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

_SCRIPT = "#!/bin/sh\ncat .eidolons/handoffs/*\n"


def _shell_hook(root: Path, command: str, agent: str | None = "vigil") -> tuple[int, str]:
    """The real hook entry point, in-process, for a Bash call by ``agent``."""
    from eidolons.hooks.fast import main

    doc: dict[str, object] = {
        "session_id": "s",
        "transcript_path": str(root / "t.jsonl"),
        "cwd": str(root),
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": command},
        "tool_use_id": "toolu_1",
    }
    if agent is not None:
        doc.update(agent_id="ae03233dc7de3192d", agent_type=agent)
    err = io.StringIO()
    code = main(
        ["claude-code", "--root", str(root)],
        stdin=io.BytesIO(json.dumps(doc).encode()),
        stdout=io.StringIO(),
        stderr=err,
    )
    return code, err.getvalue()


@pytest.fixture
def scripted(project: Path) -> Path:
    """A project with a hand-off, a receiver's executable script ``peek.sh``, the same
    script not executable yet (``nox.sh``: the command makes it so) and a plain file."""
    root = project.resolve()
    (root / ".eidolons" / "handoffs").mkdir(parents=True)
    (root / ".eidolons" / "handoffs" / "secret.md").write_text("# hand-off bytes\n")
    for name in ("peek.sh", "nox.sh"):
        (root / name).write_text(_SCRIPT)
    (root / "peek.sh").chmod(0o755)
    (root / "notes.txt").write_text("plain\n")
    return root


# HOLE (fixed, ADR 0137): ADR 0134 judged a segment's first word as its program and the
# other words only when they were executables already; a reserved word before the
# program (`{`, `if`, `do`, `!`, `coproc`, a function body), a runner with options
# (`nice -n 5`, `timeout 5`, `ionice -c 3`, `stdbuf -o0`, `time -p`, `command -p`), a
# newline (shlex read it as a space) or a script made executable or copied by the
# same command ran the receiver's own code
_FIXED = [
    "chmod +x nox.sh; {{ ./nox.sh; }}",
    "chmod +x nox.sh; if ./nox.sh; then :; fi",
    "chmod +x nox.sh; while ./nox.sh; do break; done",
    "chmod +x nox.sh; for f in 1; do ./nox.sh; done",
    "chmod +x nox.sh; select x in a; do ./nox.sh; done",
    "chmod +x nox.sh; f() {{ ./nox.sh; }}; f",
    "chmod +x nox.sh; true && then ./nox.sh",
    "chmod +x nox.sh; coproc ./nox.sh",
    "chmod +x nox.sh; nice -n 5 ./nox.sh",
    "chmod +x nox.sh; timeout 5 ./nox.sh",
    "chmod +x nox.sh; ionice -c 3 ./nox.sh",
    "chmod +x nox.sh; stdbuf -o0 ./nox.sh",
    "chmod +x nox.sh; time -p ./nox.sh",
    "chmod +x nox.sh; command -p ./nox.sh",
    "cp peek.sh /tmp/red15b-{n}; timeout 5 /tmp/red15b-{n}",
    "cp peek.sh /tmp/red15b-{n}; {{ /tmp/red15b-{n}; }}",
    "mv nox.sh /tmp/red15b-{n} && chmod +x /tmp/red15b-{n} && nice -n 1 /tmp/red15b-{n}",
    "chmod +x nox.sh\n./nox.sh",
    "cp peek.sh /tmp/red15b-{n}\n/tmp/red15b-{n}",
    # the variables that decide what runs, set other than by NAME=value
    "PATH+=:{root}; peek.sh",
    "export PATH+=:{root}; peek.sh",
    "read -r PATH < notes.txt; cat notes.txt",
    "printf -v PATH %s {root}; peek.sh",
    "unset PATH; peek.sh",  # bash then searches the working directory
    "for PATH in {root}; do peek.sh; done",
    "declare -n r=PATH; r={root}; peek.sh",
]
# guards: bypasses ADR 0134 already refused
_GUARDS = [
    "env ./peek.sh",
    "nice ./peek.sh",
    "nohup ./peek.sh",
    "xargs ./peek.sh",
    "find notes.txt -exec ./peek.sh \\;",
    "command ./peek.sh",
    "exec ./peek.sh",
    "builtin ./peek.sh",
    "source ./peek.sh",
    ". ./peek.sh",
    "cat <(./peek.sh)",
    "echo $(./peek.sh)",
    "./p*k.sh",
    "/???/../tmp/x",
    "'./peek.sh'",
    "\\./peek.sh",
    "bash <<EOF\ncat .eidolons/handoffs/secret.md\nEOF",
    "{{ ./peek.sh; }}",
    "! ./peek.sh",
    "chmod +x nox.sh; ./nox.sh",
    "chmod +x nox.sh; case x in x) ./nox.sh;; esac",
    "ln -s {root}/peek.sh /tmp/red15b-{n}; /tmp/red15b-{n}",
    "cp nox.sh cat; chmod +x cat; PATH=. cat",
    "cat notes.txt \\\n; ./nox.sh",
]


@pytest.mark.parametrize("command", _FIXED + _GUARDS)
def test_a_receiver_s_own_program_is_refused_however_it_is_reached(
    scripted: Path, command: str
) -> None:
    text = command.format(root=scripted, n=os.getpid())
    code, err = _shell_hook(scripted, text)
    assert code == 2, err
    # the refusal says why, in one line, naming the command's construct
    assert err.count("\n") == 1 and err.startswith("eidolons hook: ")
    assert not list(Path("/tmp").glob(f"red15b-{os.getpid()}"))  # nothing ran


@pytest.mark.parametrize(
    "command",
    [
        "cat notes.txt",
        "printf '%s\\n' notes.txt",
        "printf -v x %s a; cat notes.txt",
        "nice -n 5 cat notes.txt",
        "timeout 5 cat notes.txt",
        "command -v cat",
        "{ cat notes.txt; }",
        "if true; then cat notes.txt; fi",
        "cat notes.txt\nwc -l notes.txt",
        "for f in a b; do echo x; done",
    ],
)
def test_plain_commands_stay_allowed(scripted: Path, command: str) -> None:
    assert _shell_hook(scripted, command) == (0, "")
