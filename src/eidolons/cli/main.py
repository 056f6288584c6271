"""The ``eidolons`` command line: parsing and dispatch. Each command is a module of
:mod:`eidolons.cli` with ``HELP``, ``add_arguments(parser)`` and ``run(args) -> int``; only
the module of the command run is imported (start-up), and ``hook`` is dispatched before
argparse is even imported (ADR 0015). The hot commands (``verify-envelope``,
``verify-incoming``) read their simple argv without argparse
(:func:`eidolons.cli.common.fast_parse`)."""

from __future__ import annotations

import sys

from eidolons import __version__
from eidolons.errors import EidolonsError

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence
    from types import ModuleType
    from typing import Any


# command name -> module under eidolons.cli (order = order in --help)
COMMANDS: dict[str, str] = {
    "init": "init",
    "demo": "demo",
    "emit": "emit",
    "verify-envelope": "verify_envelope",
    "verify-incoming": "verify_incoming",
    "run": "run",
    "check": "check",
    "contracts": "contracts",
    "trace": "trace",
    "memory": "memory",
    "keys": "keys",
    "skill": "skill",
    "mcp": "mcp",
    "a2a": "a2a",
    "hook": "hook",
    "doctor": "doctor",
    "completion": "completion",
}

#: One exit-code vocabulary for every command (ADR 0003); ``check`` keeps upstream's.
EXIT_CODES = (
    "exit codes: 0 done or pass, 2 usage error or malformed input, 3 refused or blocked, "
    "70 internal error"
)
EXIT_CODES_OWN = {
    "check": "exit codes (the upstream checker's): 0 pass, 2 a MUST failed, 4 warnings only, "
    "1 usage error; --exit-zero and --fail-on must|should change them",
    "hook": "exit codes: those of the host's hook protocol (see `eidolons hook --help`)",
    "mcp": "exit codes: 0 when the client ends the session, 2 usage error, 70 internal error",
}
#: Examples shown in each command's --help (the README runs the same ones).
EXAMPLES: dict[str, tuple[str, ...]] = {
    "demo": ("eidolons demo", "eidolons demo --keep /tmp/eidolons-demo"),
    "emit": (
        "eidolons emit .eidolons/handoffs/scout-report.md --from atlas@1.4.2 --to vigil@1.9.0 "
        "--performative PROPOSE --kind scout-report --objective 'Scout report for VIGIL.'",
        "ECL_HMAC_KEY=... eidolons emit change.md --from apivr --to vigil --performative "
        "PROPOSE --kind change-summary --objective 'Change summary for VIGIL.' --hmac "
        '--ise \'{"assertion_grade": "self-attested"}\'',
    ),
    "verify-envelope": (
        "eidolons verify-envelope .eidolons/handoffs/scout-report.envelope.json",
        "eidolons verify-envelope scout-report.envelope.json --mode warn --json",
    ),
    "verify-incoming": (
        "eidolons verify-incoming .eidolons/handoffs/scout-report.md --as vigil --print-payload",
        "eidolons verify-incoming notes.md --as vigil --require-envelope",
    ),
    "run": (
        "eidolons run --verify scout-report.envelope.json --as vigil -- vigil-dispatch",
        "eidolons run --verify scout-report.envelope.json --json",
    ),
    "check": ("eidolons check handoffs/", "eidolons check a b -q --fail-on must"),
    "contracts": ("eidolons contracts list --to vigil", "eidolons contracts show apivr vigil"),
    "trace": ("eidolons trace show scout-report.envelope.json", "eidolons trace list"),
    "a2a": (
        "eidolons a2a serve --as vigil --port 8047 -- vigil-dispatch",
        "eidolons a2a send .eidolons/handoffs/scout-report.md --to http://127.0.0.1:8047/",
    ),
    "memory": ('eidolons memory recall "install.sh race" --as vigil', "eidolons memory stats"),
    "completion": (
        "eidolons completion bash > ~/.local/share/bash-completion/completions/eidolons",
        "eidolons completion zsh > ~/.zfunc/_eidolons",
        "eidolons completion fish > ~/.config/fish/completions/eidolons.fish",
    ),
}


def epilog(name: str) -> str:
    """A command's --help epilog: examples, then its exit codes."""
    lines = ["examples:", *(f"  {e}" for e in EXAMPLES.get(name, (f"eidolons {name} --help",)))]
    return "\n".join([*lines, "", EXIT_CODES_OWN.get(name, EXIT_CODES)])


EXIT_USAGE = 2  # as eidolons.cli.parser.EXIT_USAGE (the parsers' own)
EXIT_INTERNAL = 70  # EX_SOFTWARE: never 0, so a crash can never read as a pass


def _load(name: str) -> ModuleType | None:
    import importlib

    try:
        return importlib.import_module(f"eidolons.cli.{COMMANDS[name]}")
    except ModuleNotFoundError as exc:  # a command not built in this version
        if exc.name == f"eidolons.cli.{COMMANDS[name]}":
            return None
        raise


def _root_parser() -> argparse.ArgumentParser:
    from eidolons.cli.parser import Parser

    parser = Parser(
        prog="eidolons",
        description="Mechanical integrity and contract gates for ECL hand-offs between agents.",
        epilog=EXIT_CODES + " (check: 0/2/4, see eidolons check --help)",
    )
    parser.add_argument("-V", "--version", action="version", version=f"eidolons {__version__}")
    return parser


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    import argparse

    parser = _root_parser()
    parser.set_defaults(_parsers={})
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS if only is None else [only]:
        module = _load(name)
        if module is None:
            continue
        p = sub.add_parser(
            name,
            help=module.HELP,
            description=module.HELP,
            epilog=epilog(name),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(p)
        if "examples:" not in (p.epilog or ""):  # a command's own epilog keeps its codes
            own = f"{p.epilog}\n\n" if p.epilog else ""
            p.epilog = own + epilog(name) if not own else own + epilog(name).split("\n\n")[0]
        p.set_defaults(_run=module.run)
        parser.get_default("_parsers")[name] = p
    return parser


#: the hot commands: their module declares ``OPTIONS`` (:class:`Option`), and
#: the simple argv shapes are read without building an argparse parser (ADR 0022)
FAST_COMMANDS = ("verify-envelope", "verify-incoming")


def fast_args(args_list: Sequence[str]) -> Any | None:
    """A hot command's simple argv parsed without argparse (as the full parser would
    parse it), or None for anything else (:func:`fast_parse`)."""
    if not args_list or args_list[0] not in FAST_COMMANDS:
        return None
    module = _load(args_list[0])
    options = getattr(module, "OPTIONS", None)
    if module is None or options is None:
        return None
    from eidolons.cli.common import fast_parse

    args = fast_parse(args_list[1:], options)
    if args is not None:
        vars(args).update(command=args_list[0], _run=module.run)
    return args


def parse(args_list: Sequence[str], parser: argparse.ArgumentParser | None = None) -> Any:
    """The parsed arguments, or the exit code after argparse's help, version or error."""
    if parser is None:
        only = args_list[0] if args_list and args_list[0] in COMMANDS else None
        parser = build_parser(only)
    try:
        args, extra = parser.parse_known_args(args_list)
        if extra:  # reported by the sub-command's own parser, with its own usage line
            sub = args._parsers.get(getattr(args, "command", None), parser)
            sub.error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as exc:  # --help, --version, or a usage error
        return int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE
    if getattr(args, "_run", None) is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    hook = args_list[:1] == ["hook"] and not {"-h", "--help"} & set(args_list)
    try:  # loading the command is under the error rule too: a module that cannot be
        if hook:  # imported is an internal error, never a traceback (ADR 0022)
            from eidolons.hosts.hook.fast import main as hook_main
        else:
            fast = fast_args(args_list)
            args = parse(args_list) if fast is None else fast
    except BaseException as exc:  # a stray SystemExit from an import included: never 0
        return hook_denied(exc) if hook else internal_error(exc)
    if hook:
        return hook_main(args_list[1:])
    if isinstance(args, int):
        return args
    return dispatch(args._run, args)


def dispatch(run: Any, args: Any) -> int:
    """Run a command; every failure is its own line and a non-zero exit code."""
    if sys.stdout is None:  # started with fd 1 closed (`>&-`): nothing it says could be read
        _say("eidolons: standard output is closed (send it to /dev/null to discard it) [USAGE]")
        module = sys.modules.get(getattr(run, "__module__", ""))
        return int(getattr(module, "EXIT_USAGE", EXIT_USAGE))  # check's own is 1 (upstream's)
    try:
        return int(run(args))
    except KeyboardInterrupt:
        print("eidolons: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1
    except EidolonsError as exc:  # typed: its own line and exit code (never 0)
        print(f"eidolons: {exc.diagnostics()}", file=sys.stderr)
        return exc.exit_code or EXIT_INTERNAL
    except Exception as exc:  # fail closed: a bug is a refusal, never a pass
        return internal_error(exc)


def internal_error(exc: BaseException) -> int:
    """``eidolons: internal error: <class>: <message>`` on stderr and exit 70 (the line
    ``bin/eidolons`` and ``__main__`` say when this module cannot be imported)."""
    if isinstance(exc, KeyboardInterrupt):
        _say("eidolons: interrupted")
        return 130
    _say(f"eidolons: internal error: {exc.__class__.__name__}: {exc}")
    return EXIT_INTERNAL


def hook_denied(exc: BaseException) -> int:
    """The hook's deny when its module cannot be loaded: exit 2, which every host blocks
    on (an exit 1 would let Claude Code run the tool)."""
    _say(f"eidolons hook: denied (internal error: {exc.__class__.__name__}: {exc})")
    return EXIT_USAGE


def _say(line: str) -> None:
    try:
        print(line, file=sys.stderr, flush=True)
    except (OSError, ValueError, AttributeError):  # stderr closed or gone: the code stands
        pass


def entry() -> None:  # pragma: no cover - console script shim
    sys.exit(main())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
