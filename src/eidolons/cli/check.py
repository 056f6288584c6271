"""``eidolons check PATH...``: the ECL conformance checker (digest section 10).

Runs every gate of :mod:`eidolons.ecl.rules` on each ``*.envelope.json`` named or found
under a directory (recursively, links not followed, ``LC_ALL=C`` order, each once) and
prints upstream's text layout, ``-q`` lines or one JSON object, streamed in input order.
Exit 0 conformant, 2 a MUST failed, 3 a SHOULD failed, 4 a warning, 1 a usage error
(``eidolons: <message>``); a malformed envelope is an E-1 result, not a usage error.
The layouts, options and the differences from upstream: ``docs/check.md``, ADR 0023.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import sys
import time
from collections.abc import Sequence
from json.encoder import encode_basestring
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn, TextIO

from eidolons._text import printable
from eidolons.io.paths import realpath

if TYPE_CHECKING:
    from pathlib import Path

    from eidolons.ecl.envelope import GateResult

HELP = "ECL conformance checker: run every gate on envelopes (files or directories)"

ENVELOPE_SUFFIX = ".envelope.json"
EXIT_USAGE = 1  # as the upstream checker; 2 means "a MUST failed"
DEFAULT_TARGET_VERSION = "2.1"  # the newest ECL version these gates implement
LEVEL_FILTERS = ("ALL", "MUST", "SHOULD")
PROGRESS_MIN = 200
_TARGET_VERSION_RE = re.compile(r"[12](\.\d+){0,2}")
_TAGS = {"ok": "[OK]   ", "fail": "[FAIL] ", "warn": "[WARN] "}
_RANK = {"MUST": 0, "SHOULD": 1, "INFO": 2}
_RESULT_LINES = {
    0: "Result: OK (exit 0)",
    2: "Result: FAIL — one or more MUSTs failed (exit 2)",
    3: "Result: SHOULD-fail (exit 3)",
    4: "Result: WARN — passes MUSTs with grandfathered warnings (exit 4)",
}


class _Usage(Exception):
    """A usage error: ``eidolons: <message>`` and exit 1."""


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """The help with upstream's capital ``Usage:`` (its tests look for it)."""

    def add_usage(self, usage: Any, actions: Any, groups: Any, prefix: Any = None) -> None:
        super().add_usage(usage, actions, groups, "Usage: " if prefix is None else prefix)


def add_arguments(p: argparse.ArgumentParser) -> None:
    from eidolons import __version__

    p.formatter_class = _Formatter
    p.add_argument("-V", "--version", action="version", version=f"eidolons {__version__}")
    p.add_argument(
        "paths", nargs="*", metavar="PATH", help="an *.envelope.json file or a directory"
    )
    p.add_argument(
        "--contracts",
        metavar="DIR",
        action="append",
        default=[],
        help="extra contract directory, overriding earlier sources per edge (repeatable)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    p.add_argument(
        "--level",
        metavar="MUST|SHOULD|ALL",
        default="ALL",
        help="text output: hide ok lines below this level (default: ALL, hide nothing)",
    )
    p.add_argument(
        "--strict", action="store_true", help="required sections (R-1) are MUST, not INFO"
    )
    p.add_argument(
        "--root",
        metavar="DIR",
        help="project root (default: $EIDOLONS_ROOT, else .eidolons/ or .git/ ancestor)",
    )
    p.add_argument(
        "--target-version",
        metavar="V",
        help="ECL version reported as targeted (1.x, 2.0, 2.1); gates follow each "
        "envelope's own version",
    )
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="failures and warnings only, one 'path: gate level message' line each (paths "
        "relative to the working directory)",
    )
    p.add_argument(
        "--fail-on",
        metavar="must|should",
        help="must: exit 2 on a MUST failure and 0 otherwise (warnings do not fail); "
        "should (the default): upstream's 2/3/4",
    )
    p.add_argument(
        "--exit-zero", action="store_true", help="exit 0 whatever is found (usage errors still 1)"
    )
    p.add_argument(
        "--jobs",
        metavar="N|auto",
        help="check with N worker processes (auto: one per CPU); output and its order are "
        "the same as with one (default: auto from 512 envelopes on, else this process; "
        "1: this process only)",
    )
    _exit_1_on_usage_errors(p)


def _exit_1_on_usage_errors(p: argparse.ArgumentParser) -> None:
    """Usage errors exit 1 as upstream (argparse would exit 2, which here means "a MUST
    failed"), then the ``Usage:`` line. Stray positionals after options are PATHs;
    unknown options are errors, and so is no PATH."""

    def error(message: str) -> NoReturn:
        p.exit(EXIT_USAGE, f"eidolons: {message}\n{p.format_usage()}")

    original = p.parse_known_args

    def parse_known_args(
        args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        ns, extras = original(args, namespace)
        unknown = [a for a in extras if a.startswith("-")]
        if unknown:
            error(f"unrecognized arguments: {' '.join(unknown)}")
        ns.paths = list(ns.paths) + extras
        if not ns.paths:
            error("no PATH given")
        return ns, []

    setattr(p, "error", error)  # noqa: B010 - instance override, argparse has no hook
    setattr(p, "parse_known_args", parse_known_args)  # noqa: B010


def run(args: argparse.Namespace) -> int:
    from eidolons.cli.common import error

    try:
        return _run(args)
    except _Usage as exc:
        return error(str(exc), EXIT_USAGE)


def _run(args: argparse.Namespace) -> int:
    from eidolons.errors import UsageError
    from eidolons.gates.checker import check_batches
    from eidolons.io.config import Limits, find_root, hmac_key
    from eidolons.io.contracts import ContractSetUnavailable, load_contracts

    level = str(args.level).upper()
    if level not in LEVEL_FILTERS:
        raise _Usage(f"--level must be MUST, SHOULD or ALL, got {args.level!r}")
    fail_on = (args.fail_on or "should").lower()
    if fail_on not in ("must", "should"):
        raise _Usage(f"--fail-on must be must or should, got {args.fail_on!r}")
    if args.quiet and args.json:
        raise _Usage("-q is for text output; --json already lists every result")
    jobs = _jobs(args.jobs)
    missing = next((p for p in args.paths if not os.path.exists(p)), None)
    if missing is not None:
        raise _Usage(f"Path not found: {missing}")
    targets = [os.path.abspath(p) for p in args.paths]
    try:
        root = find_root(args.root)
        limits = Limits.from_env(os.environ)
        state = _state(root)
    except UsageError as exc:
        raise _Usage(str(exc)) from None
    envelopes = _collect(targets, state)
    target_version = _target_version(args.target_version, targets)
    contracts = load_contracts(root, args.contracts)
    if isinstance(contracts, ContractSetUnavailable):
        raise _Usage(contracts.reason)
    key = hmac_key()

    out = sys.stdout
    if hasattr(out, "reconfigure"):  # file names need not be UTF-8: print them escaped
        out.reconfigure(errors="backslashreplace")
    progress = _Progress(len(envelopes), sys.stderr, shares_screen=_isatty(out))
    kind: type[_Report] = (
        _JsonReport if args.json else (_QuietReport if args.quiet else _TextReport)
    )
    report = kind(
        out,
        targets=targets,
        version=target_version,
        count=len(envelopes),
        sources=contracts.sources,
        level=level,
        strict=bool(args.strict),
    )
    report.start()
    batches = check_batches(
        envelopes,
        contracts,
        root=root,
        key=key,
        strict=args.strict,
        limits=limits,
        jobs=jobs,
        render=report.render,  # in the workers, if any: what comes back is text and counts
    )
    try:
        for done, rendered in batches:
            progress.clear()
            report.add(rendered)
            progress.tick(done)
    finally:
        batches.close()  # workers, if any, are stopped now, whatever ended the loop
    progress.clear(done=True)
    code = report.finish()
    return 0 if args.exit_zero or (fail_on == "must" and code != 2) else code


# --------------------------------------------------------------------------- inputs


def _jobs(raw: str | None) -> int | None:
    """``--jobs N``: a positive integer; ``auto`` is the number of CPUs this process may
    use. Absent: None, which is ``auto`` from :data:`eidolons.gates.checker.AUTO_MIN` envelopes
    on and this process only below (:func:`eidolons.gates.checker.workers_for`; ADR 0022)."""
    if raw is None:
        return None
    if raw == "auto":
        from eidolons.gates.checker import auto_jobs

        return auto_jobs()
    if not (raw.isascii() and raw.isdecimal()) or int(raw) < 1:  # "３" is no count here
        raise _Usage(f"--jobs must be a positive integer or auto, got {raw!r}")
    return int(raw)


def _state(root: Path) -> tuple[str, tuple[str, ...]]:
    """The project's state directory and its hand-off directories, as real paths: a walk
    from above the state skips the tool's own files there (hand-backs, trace, contracts,
    memory, keys) but never a hand-off directory. Raises :class:`UsageError`."""
    from eidolons.io.config import handoff_dirs
    from eidolons.io.paths import STATE_DIR

    kept = tuple(realpath(d) for d in handoff_dirs(root))
    return realpath(os.path.join(root, STATE_DIR)), kept


def _project_files(target: str, found: list[str], state: tuple[str, tuple[str, ...]]) -> list[str]:
    """``found`` under the directory ``target`` less the tool's own state (:func:`_state`),
    unless ``target`` is in the state directory itself (named, so checked)."""
    from eidolons.io.paths import is_relative_to as within

    real = realpath(target)
    top, kept = state
    if within(real, top):
        return found
    wheres = [(path, real + path[len(target) :]) for path in found]
    return [p for p, w in wheres if not within(w, top) or any(within(w, d) for d in kept)]


def _collect(targets: Sequence[str], state: tuple[str, tuple[str, ...]]) -> list[str]:
    """Every envelope under ``targets``, each directory's in ``LC_ALL=C`` path order,
    each once, the tool's own state aside (:func:`_project_files`). Each distinct
    directory is listed once, however many times and by whatever spelling it is named
    (:func:`eidolons.io.payload.find_envelopes`' ``listed``): a directory named again
    adds nothing, and is not walked again."""
    from eidolons.errors import InputError
    from eidolons.io.payload import find_envelopes, listed_before

    seen: set[str] = set()
    out: list[str] = []
    listed: dict[tuple[int, int], tuple[list[str], list[str]]] = {}
    for target in targets:
        if os.path.isdir(target):
            try:
                if listed_before(target, listed):
                    continue  # named before: its envelopes are in already
                found = _project_files(target, find_envelopes(target, listed), state)
            except OSError as exc:
                raise _Usage(f"cannot list {target}: {exc.strerror or exc}") from None
            except InputError as exc:
                raise _Usage(str(exc)) from None
            if not found:
                raise _Usage(f"No *{ENVELOPE_SUFFIX} files found under {target}")
        elif target.endswith(ENVELOPE_SUFFIX):
            found = [target]
        else:
            raise _Usage(f"Not an envelope file: {target}")
        for path in found:
            if path not in seen:
                seen.add(path)
                out.append(path)
    return out


def _target_version(explicit: str | None, targets: Sequence[str]) -> str:
    """``--target-version``, else the first line of ``<first PATH>/ECL_VERSION`` when the
    first PATH is a directory holding one, else :data:`DEFAULT_TARGET_VERSION`."""
    version = explicit
    if version is None:
        marker = os.path.join(targets[0], "ECL_VERSION")
        if os.path.isdir(targets[0]) and os.path.isfile(marker):
            try:
                with open(marker, encoding="utf-8", errors="replace") as fh:
                    version = "".join(fh.readline().split())
            except OSError:
                version = None
        version = version or DEFAULT_TARGET_VERSION
    if not _TARGET_VERSION_RE.fullmatch(version):
        raise _Usage(f"Unsupported --target-version: {version} (this checker knows 1.x, 2.0, 2.1)")
    return version


# --------------------------------------------------------------------------- output


def _isatty(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class _Rendered(NamedTuple):
    """A batch of envelopes as the report prints and counts it (a worker's answer)."""

    text: str
    counts: dict[str, int]
    code: int  # the batch's exit code


_SEVERITY = {0: 0, 4: 1, 3: 2, 2: 3}  # exit codes, from the least to the most severe


class _Report:
    def __init__(
        self,
        out: TextIO,
        *,
        targets: Sequence[str],
        version: str,
        count: int,
        sources: Sequence[str],
        level: str,
        strict: bool,
    ) -> None:
        self.out = out
        self.level = level
        self.strict = strict
        self.targets = list(targets)
        self.version = version
        self.count = count
        self.sources = list(sources)
        self.counts = {"ok": 0, "fail": 0, "warn": 0}
        self.exit_code = 0

    def render(self, batch: Sequence[Sequence[GateResult]]) -> _Rendered:
        """The output lines of a batch of envelopes' results and what they count: pure
        (it reads only the options set by :meth:`start`), so a worker process renders
        its own batches and the parent only writes them (:meth:`add`)."""
        from eidolons.ecl.rules.run import exit_code

        counts: dict[str, int] = {}
        for results in batch:
            for r in results:
                counts[r.status] = counts.get(r.status, 0) + 1
        code = exit_code(r for results in batch for r in results)
        return _Rendered(self._lines(batch), counts, code)

    def _lines(self, batch: Sequence[Sequence[GateResult]]) -> str:
        raise NotImplementedError

    def start(self) -> None:
        pass

    def finish(self) -> int:
        self.out.flush()
        return self.exit_code

    def add(self, rendered: _Rendered) -> None:
        """Count a rendered batch and write its text (batches arrive in input order)."""
        for status, n in rendered.counts.items():
            self.counts[status] = self.counts.get(status, 0) + n
        self.exit_code = max(self.exit_code, rendered.code, key=_SEVERITY.__getitem__)
        if rendered.text:
            self.out.write(rendered.text)


class _TextReport(_Report):
    def start(self) -> None:
        lines = ["ECL conformance check"]
        lines += [f"Target:        {printable(t)}" for t in self.targets]
        lines += [
            f"Target ECL:    {self.version}",
            f"Envelopes:     {self.count}",
            f"Contracts:     {printable(', '.join(self.sources))}",
            f"Level filter:  {self.level}",
            "----",
        ]
        self.out.write("\n".join(lines) + "\n")
        self._hide_below = {"ALL": 3, "SHOULD": 1, "MUST": 0}[self.level]

    def _lines(self, batch: Sequence[Sequence[GateResult]]) -> str:
        lines = []
        hide_below = self._hide_below
        for results in batch:
            shown: dict[str | None, str] = {}  # the target is the same for one envelope
            for r in results:
                if r.status == "ok" and _RANK.get(r.level, 2) > hide_below:
                    continue
                line = _text_head(r.status, r.id, r.level, r.name)
                if r.target:
                    where = shown.get(r.target)
                    if where is None:
                        where = shown[r.target] = f" <{printable(os.path.basename(r.target))}>"
                    line += where
                if r.reason:
                    line += f" ({printable(r.reason)})"
                lines.append(line)
        return "\n".join(lines) + "\n" if lines else ""

    def finish(self) -> int:
        self.out.write(f"----\n{_RESULT_LINES[self.exit_code]}\n")
        return super().finish()


class _QuietReport(_Report):
    """``-q``: only what failed or warned, as ``path: gate level message`` (the path
    relative to the working directory, so two ``scout-report.envelope.json`` in ``a/``
    and ``b/`` are told apart), and nothing else."""

    def _lines(self, batch: Sequence[Sequence[GateResult]]) -> str:
        lines = []
        for results in batch:
            for r in results:
                if r.status == "ok":
                    continue
                where = os.path.relpath(r.target) if r.target else "-"
                message = r.name + (f": {r.reason}" if r.reason else "")
                lines.append(
                    f"{printable(where)}: {r.id} {r.level} {r.status} {printable(message)}"
                )
        return "\n".join(lines) + "\n" if lines else ""


class _JsonReport(_Report):
    def start(self) -> None:
        head = {
            "target": self.targets[0],
            "targets": self.targets,
            "ecl_version_targeted": self.version,
            "envelopes": self.count,
            "contracts": self.sources,
            "level_filter": self.level,
            "strict": self.strict,
        }
        body = json.dumps(head, indent=2, ensure_ascii=False)[:-2]  # drop "\n}"
        self.out.write(body + ',\n  "results": [')
        self._first = True

    def _lines(self, batch: Sequence[Sequence[GateResult]]) -> str:
        """The batch's result objects joined by ``,\\n    `` (without the separator
        before the first: :meth:`add` writes it, knowing whether one came before)."""
        lines = []
        for results in batch:
            quoted: dict[str | None, str] = {}  # the target is the same for one envelope
            for r in results:
                line = _json_head(r.id, r.level, r.status, r.name)
                if r.target is not None:
                    target = quoted.get(r.target)
                    if target is None:
                        target = quoted[r.target] = ', "target": ' + _quote(r.target)
                    line += target
                if r.reason is not None:
                    line += ', "reason": ' + _quote(r.reason)
                lines.append(line + "}")
        return ",\n    ".join(lines)

    def add(self, rendered: _Rendered) -> None:
        if rendered.text:
            sep = "\n    " if self._first else ",\n    "
            rendered = rendered._replace(text=sep + rendered.text)
            self._first = False
        super().add(rendered)

    def finish(self) -> int:
        tail: dict[str, Any] = {"counts": self.counts, "exit_code": self.exit_code}
        rest = json.dumps(tail, indent=2, ensure_ascii=False)[1:]  # drop "{"
        self.out.write(("\n  ]," if not self._first else "],") + rest + "\n")
        return super().finish()


def _quote(text: str | None) -> str:
    """A JSON string (``null`` for None), non-ASCII kept as is: what
    ``json.dumps(text, ensure_ascii=False)`` gives (it calls this same encoder), without
    building a new encoder for every string."""
    return "null" if text is None else encode_basestring(text)


@functools.lru_cache(maxsize=1024)
def _json_head(gid: str, level: str, status: str, name: str) -> str:
    """``{"id": .., "level": .., "status": .., "name": ..`` of a result line: the gates'
    small vocabulary, quoted once per run instead of four times per result."""
    return (
        f'{{"id": {_quote(gid)}, "level": {_quote(level)}, '
        f'"status": {_quote(status)}, "name": {_quote(name)}'
    )


@functools.lru_cache(maxsize=1024)
def _text_head(status: str, gid: str, level: str, name: str) -> str:
    """``[OK]   E-1 MUST envelope_is_json``: the start of a text line, made once per run."""
    return f"{_TAGS.get(status, '[?]    ')}{gid} {level} {name}"


class _Progress:
    """``\\r[#####     ] 1234/10000`` on stderr, redrawn about 200 times in a run."""

    WIDTH = 30

    def __init__(self, total: int, stream: TextIO, *, shares_screen: bool) -> None:
        self.total = total
        self.stream = stream
        self.enabled = total > PROGRESS_MIN and _isatty(stream)
        self.shares_screen = shares_screen  # stdout is a terminal too: clear before output
        self.step = max(1, total // 200)
        self.drawn = 0
        self.ticked = 0  # the last ``done`` seen
        self.last = 0.0

    def tick(self, done: int) -> None:
        if not self.enabled:
            return
        # a step boundary crossed (``done`` moves by one envelope, or by a worker's batch)
        crossed = done // self.step != self.ticked // self.step
        self.ticked = done
        if not (self.shares_screen and not self.drawn):  # else: redraw what clear() wiped
            if not crossed and done != self.total:
                return
            now = time.monotonic()
            if done != self.total and now - self.last < 0.05:
                return
            self.last = now
        filled = self.WIDTH * done // self.total
        text = f"\r[{'#' * filled}{' ' * (self.WIDTH - filled)}] {done}/{self.total}"
        self.stream.write(text)
        self.stream.flush()
        self.drawn = len(text) - 1

    def clear(self, done: bool = False) -> None:
        """Wipe the bar before output goes to the same screen, or at the end (``done``)."""
        if self.drawn and (done or self.shares_screen):
            self.stream.write("\r" + " " * self.drawn + "\r")
            self.stream.flush()
            self.drawn = 0
