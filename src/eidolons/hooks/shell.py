"""Best-effort reading of a shell command: which files it names, and whether it can be read.

A hook cannot know what a shell command will read (``python -c`` needs no file name a hook
could see); this module finds what the command *names*, and says when it cannot tell:

- the command is split with :mod:`shlex` (POSIX rules, punctuation as separate tokens)
  into simple commands at ``;``, ``&&``, ``||``, ``|``, ``&``, parentheses and newlines;
  a command that does not split (an unclosed quote) is opaque;
- **opaque** constructs: parameter or command substitution (``$``, backquotes), process
  substitution, here-documents, ``eval``/``source``/``exec``, and programs that run code
  given inline or read file names from elsewhere (interpreters, shells, ``xargs``,
  ``find -exec``, ``awk``, ``sed``...). For a receiver the hook treats an opaque command
  as a refusal: failing closed when in doubt;
- a simple command whose program is ``eidolons`` (by name, by path, or ``python -m
  eidolons``) is the gate itself: its words are not inspected as paths, its arguments
  are kept (``gate_calls``) for the hook to judge which gate command an agent may run;
- every other word is a candidate path: joined to the working directory, ``~``
  expanded, globs expanded (what the shell would expand), and each result classified by
  the hook; a word that mentions the hand-off directory's or a hand-off's name without
  resolving to it counts as naming it. ``cd``/``pushd`` targets are followed: a word is
  joined to every working directory it may be relative to;
- brace expansion (``{a,b}``, ``{1..3}``) is opaque (a name the shell builds);
- a segment that reads a directory tree (``grep -r``, ``rg``, ``find``, ``cp -r``,
  ``ls -R``...) is kept in ``recursive``: with no directory operand it reads the working
  directory.
"""

from __future__ import annotations

import os

SEPARATORS = frozenset({";", "&&", "||", "|", "&", "(", ")", "\n", ";;", "|&"})
REDIRECTS = frozenset({">", ">>", "<", "<>", ">|", "&>", "&>>", ">&", "<&"})
OPAQUE_PROGRAMS = frozenset(
    {
        "eval",
        "source",
        ".",
        "exec",
        "xargs",
        "parallel",
        "sh",
        "bash",
        "zsh",
        "dash",
        "ksh",
        "fish",
        "csh",
        "tcsh",
        "python",
        "python2",
        "python3",
        "pypy",
        "pypy3",
        "perl",
        "ruby",
        "node",
        "nodejs",
        "deno",
        "bun",
        "php",
        "lua",
        "tclsh",
        "awk",
        "gawk",
        "mawk",
        "nawk",
        "sed",
        "make",
        "env",
        "sudo",
        "su",
        "watch",
        "script",
        "busybox",
        "vim",
        "vi",
        "nvim",
        "emacs",
        "ed",
        "ex",
        "git",
        "docker",
        "ssh",
        "tar",
        "zip",
        "unzip",
        "rsync",
        "scp",
        "socat",
        "nc",
        # programs that run a command later, where no hook sees it
        "at",
        "batch",
        "crontab",
        "systemd-run",
        "screen",
        "tmux",
        "expect",
        "gdb",
        # builtins that change what a later name runs
        "hash",
        "enable",
        "alias",
        "shopt",
        "trap",
        # programs that run code the command does not name: every executable of a
        # directory, a command string, a shell reading its input
        "run-parts",
        "sg",
        "newgrp",
    }
)
#: builtins whose ``NAME=value`` arguments set the environment of what runs next
ASSIGNING = frozenset({"export", "declare", "typeset", "readonly", "local"})
# programs that read a whole directory tree: always, or with one of these short flags
RECURSIVE_ALWAYS = frozenset({"rg", "ag", "ack", "find", "tree", "du"})
RECURSIVE_FLAGS = {
    "grep": "rR",
    "egrep": "rR",
    "fgrep": "rR",
    "zgrep": "rR",
    "cp": "rRa",
    "ls": "R",
    "diff": "r",
}
RECURSIVE_LONG = ("--recursive", "--dereference-recursive", "--archive", "--directories=recurse")
DIR_CHANGERS = frozenset({"cd", "pushd", "popd"})
# words before the program that do not change what it reads
PREFIX_WORDS = frozenset({"command", "builtin", "nice", "nohup", "time", "stdbuf", "ionice"})
#: the options of a prefix word that take the next word as their value (``nice -n 5``)
PREFIX_OPTION_VALUES = {
    "nice": frozenset({"-n", "--adjustment"}),
    "ionice": frozenset({"-c", "--class", "-n", "--classdata", "-p", "--pid"}),
    "stdbuf": frozenset({"-i", "--input", "-o", "--output", "-e", "--error"}),
}
#: the shell's reserved words that may come before a simple command's program
#: (``{ ./x; }``, ``if ./x``, ``do ./x``, ``! ./x``, ``coproc ./x``)
RESERVED_PREFIXES = frozenset(
    {"{", "}", "!", "if", "then", "else", "elif", "do", "while", "until", "coproc"}
)
#: programs that run their operands as a program (after options and their values): each
#: operand is judged as a program (ADR 0137)
RUNNERS = PREFIX_WORDS | frozenset(
    {
        "timeout",
        "setsid",
        "strace",
        "ltrace",
        "chrt",
        "taskset",
        "flock",
        "unbuffer",
        "chroot",
        "unshare",
        "nsenter",
        "prlimit",
        "runuser",
        "setpriv",
        "valgrind",
        "numactl",
        "cgexec",
        "firejail",
        "bwrap",
        "catchsegv",
        "faketime",
        "torsocks",
        "proxychains",
        "doas",
        "pkexec",
        "setarch",
        "linux32",
        "linux64",
        "i386",
        "x86_64",
        "uname26",
        "fakeroot",
        "perf",
        "ssh-agent",
        "dbus-run-session",
        "eatmydata",
        "chronic",
        "ifne",
        "xvfb-run",
        "cpulimit",
        "trickle",
        "nocache",
        "chpst",
    }
)
#: builtins and keywords that set the variables they name (``read PATH``, ``printf -v
#: PATH``, ``for PATH in``, ``unset PATH``: an unset PATH searches the working directory)
VARIABLE_SETTERS = frozenset(
    {"read", "printf", "mapfile", "readarray", "getopts", "unset", "let", "for", "select"}
)


class ShellReading:
    """What a command names: ``words`` (candidate operands) and, for each, ``dirs`` (the
    working directories it may be relative to: the call's, and every ``cd`` target met
    before it), ``opaque`` (why it cannot be read, or None), whether it runs the gate
    (``eidolons``) in some segment, the arguments of each such run (``gate_calls``, what
    follows ``eidolons``), and the segments that read a directory tree (``recursive``:
    program, operands, working directories)."""

    __slots__ = (
        "assigned",
        "by_path",
        "dirs",
        "gate_calls",
        "module_dirs",
        "opaque",
        "others",
        "programs",
        "recursive",
        "run_names",
        "runs_gate",
        "words",
    )

    def __init__(self) -> None:
        self.words: list[str] = []
        self.dirs: list[tuple[str, ...]] = []
        self.opaque: str | None = None
        self.runs_gate = False
        self.gate_calls: list[list[str]] = []
        self.recursive: list[tuple[str, list[str], tuple[str, ...]]] = []
        #: each simple command's program word, with the directories it may run from
        self.programs: list[tuple[str, tuple[str, ...]]] = []
        #: the programs given by path that are not the gate (a link there may be an
        #: interpreter under another name: ADR 0137)
        self.by_path: list[tuple[str, tuple[str, ...]]] = []
        #: a runner's operands by name (``timeout 5 peek``): any of them may be the
        #: program it runs, looked up on ``PATH``
        self.run_names: list[str] = []
        #: the variables the command sets for what it runs (``NAME=value cmd``,
        #: ``export NAME=value``)
        self.assigned: list[str] = []
        #: where a ``python -m eidolons`` runs (the current directory comes first on its
        #: ``sys.path``: an ``eidolons`` there is not the gate)
        self.module_dirs: list[tuple[str, ...]] = []
        #: how many simple commands are neither the gate nor ``cd``: one of them may
        #: write the ``eidolons`` a later ``python -m eidolons`` imports (ADR 0137)
        self.others = 0


def _gate_args(words: list[str]) -> list[str] | None:
    """The arguments after ``eidolons`` (or ``python -m eidolons``), or None."""
    if not words:
        return None
    program = os.path.basename(words[0])
    if program == "eidolons":
        return words[1:]
    if program.startswith("python") and words[1:3] == ["-m", "eidolons"]:
        return words[3:]
    return None


def _wrapped_gate_args(words: list[str]) -> list[str] | None:
    """The arguments of an ``eidolons`` run behind a wrapper program (``uv run``, ``timeout
    5``, ``nice -n 5``...): judged as a gate call too; the command's words still are."""
    for i in range(1, len(words)):
        args = _gate_args(words[i:])
        if args is not None:
            return args
    return None


def program_base(word: str) -> str:
    base = os.path.basename(word)
    # python3.11, pypy3.10 -> python3, pypy3
    stem = base.rstrip("0123456789.")
    return stem if stem in OPAQUE_PROGRAMS else base


def _recurses(program: str, args: list[str]) -> bool:
    if program in RECURSIVE_ALWAYS:
        return True
    flags = RECURSIVE_FLAGS.get(program)
    if not flags:
        return False
    for arg in args:
        if arg.startswith("--"):
            if arg in RECURSIVE_LONG:
                return True
        elif arg.startswith("-") and any(c in flags for c in arg[1:]):
            return True
    return False


def _has_brace_expansion(word: str) -> bool:
    open_at = word.find("{")
    return open_at >= 0 and "}" in word[open_at:] and ("," in word or ".." in word)


def read_command(command: str, cwd: str = "/") -> ShellReading:
    """Read ``command`` as run from ``cwd`` (``cd`` targets are followed: every word is
    judged against each working directory it may be relative to)."""
    import shlex

    out = ShellReading()
    cwds: tuple[str, ...] = (cwd,)
    if "$" in command or "`" in command:
        out.opaque = "parameter or command substitution"
    if "<<" in command:
        out.opaque = "a here-document"
    if "<(" in command or ">(" in command:
        out.opaque = "process substitution"
    # a newline ends a command as `;` does (shlex took it for a space: `cp x /tmp/y` and
    # `/tmp/y` on two lines were one command); a backslash-newline joins lines
    command = command.replace("\\\n", "")
    lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|()<>\n")
    lexer.whitespace = " \t\r"
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        tokens = list(lexer)
    except ValueError as exc:
        out.opaque = f"the command does not parse ({exc})"
        # still look at the words, split on whitespace
        tokens = command.split()
    if any(_has_brace_expansion(t) for t in tokens):
        out.opaque = out.opaque or "brace expansion"
    segments: list[list[str]] = [[]]
    for token in tokens:
        # `{`/`}` (a group, a function body, `coproc NAME { ... }`) start a command too
        if token in SEPARATORS or token in ("{", "}") or (token and set(token) <= set(";&|()\n")):
            segments.append([])
        else:
            segments[-1].append(token)
    for segment in segments:
        words = _without_redirects(segment)
        while words and (
            words[0] in RESERVED_PREFIXES or ("=" in words[0] and not words[0].startswith("="))
        ):
            if words[0] not in RESERVED_PREFIXES:  # VAR=value (or VAR+=value) prefix
                out.assigned.append(words[0].partition("=")[0].rstrip("+"))
            words = words[1:]
        if words and os.path.basename(words[0]) in RUNNERS:
            # `nice -n 5 ./x`, `timeout 5 /tmp/y`: what it runs is an operand (ADR 0137)
            run = [(w, cwds) for w in words[1:] if "/" in w and w[:1] != "-"]
            out.programs.extend(run)
            out.by_path.extend(run)
            # by name it is looked up on PATH (`timeout 5 peek`, `setsid peek`)
            out.run_names.extend(w for w in words[1:] if "/" not in w and w[:1] != "-")
        while words and os.path.basename(words[0]) in PREFIX_WORDS:
            words = _past_options(os.path.basename(words[0]), words[1:])
        if not words:
            continue
        out.programs.append((words[0], cwds))
        if words[0] in ASSIGNING:
            if any(w.startswith("-") and "n" in w for w in words[1:]):
                out.opaque = out.opaque or f"{words[0]} -n (a name that sets another)"
            out.assigned.extend(w.partition("=")[0].rstrip("+") for w in words[1:] if "=" in w)
        if words[0] in VARIABLE_SETTERS:
            out.assigned.extend(_set_names(words))
        gate_args = _gate_args(words)
        if gate_args is not None:
            out.runs_gate = True
            out.gate_calls.append(gate_args)
            if os.path.basename(words[0]).startswith("python"):
                out.module_dirs.append(cwds)
            continue
        wrapped = _wrapped_gate_args(words)
        if wrapped is not None:  # `uv run eidolons ...`, `timeout 5 eidolons ...`
            out.gate_calls.append(wrapped)
            if any(os.path.basename(w).startswith("python") for w in words):
                out.module_dirs.append(cwds)  # `timeout 5 python3 -m eidolons`
        elif os.path.basename(words[0]) not in DIR_CHANGERS:
            out.others += 1
        program = program_base(words[0])
        if "/" in words[0]:
            out.by_path.append((words[0], cwds))
        if program in OPAQUE_PROGRAMS and out.opaque is None:
            out.opaque = f"{program} can read files the command does not name"
        if program == "find" and any(w in ("-exec", "-execdir", "-ok", "-okdir") for w in words):
            out.opaque = out.opaque or "find -exec"
        named = [*words[1:], words[0], *_redirect_targets(segment)]
        out.words.extend(named)
        out.dirs.extend(cwds for _ in named)
        if _recurses(program, words[1:]):
            out.recursive.append((program, words[1:], cwds))
        if program in DIR_CHANGERS:
            targets = [w for w in words[1:] if not w.startswith("-")] or ["~"]
            here = os.path.expanduser(targets[0]) if targets[0].startswith("~") else targets[0]
            cwds = tuple(
                dict.fromkeys([*cwds, *(os.path.normpath(os.path.join(d, here)) for d in cwds)])
            )
    return out


def _set_names(words: list[str]) -> list[str]:
    """The variables a :data:`VARIABLE_SETTERS` command sets (``printf -v NAME``, the
    loop variable of ``for``/``select``, every operand of the others)."""
    if words[0] == "printf":
        return [words[i + 1] for i in range(1, len(words) - 1) if words[i].startswith("-v")] + [
            w[2:] for w in words[1:] if w.startswith("-v") and len(w) > 2
        ]
    if words[0] in ("for", "select"):
        return words[1:2]
    return [w for w in words[1:] if not w.startswith("-")]


def _without_redirects(segment: list[str]) -> list[str]:
    """The segment's words without its redirections: the operator, its target and the
    descriptor number before it (``2>/dev/null ./x`` runs ``./x``, not ``2``)."""
    words: list[str] = []
    skip = False
    for i, word in enumerate(segment):
        if skip:
            skip = False
            continue
        if word in REDIRECTS or _is_redirect(word):
            skip = True  # its target
            continue
        nxt = segment[i + 1] if i + 1 < len(segment) else ""
        if word.isdigit() and (nxt in REDIRECTS or _is_redirect(nxt)):
            continue
        words.append(word)
    return words


def _is_redirect(word: str) -> bool:
    # 2>, 1>>, 2>&1 and the like (punctuation split keeps digits on the word)
    stripped = word.lstrip("0123456789")
    return bool(stripped) and stripped != word and set(stripped) <= set("<>&|")


def _redirect_targets(segment: list[str]) -> list[str]:
    out = []
    for i, word in enumerate(segment[:-1]):
        if word in REDIRECTS or _is_redirect(word):
            out.append(segment[i + 1])
    return out


def expand_word(word: str, cwd: str) -> list[str]:
    """The absolute paths a word can name: itself, ``~`` expanded, and glob matches. A
    word that looks like an option names a file too when one by that name exists (after
    ``--``, or for a program that takes no such option, ``-r.md`` is a file)."""
    if not word:
        return []
    if word.startswith("-"):
        as_file = [os.path.normpath(os.path.join(cwd, word))]
        if not os.path.lexists(as_file[0]):
            as_file = []
        if "=" not in word:  # --file=PATH
            return as_file
        word = word.partition("=")[2]
        if not word:
            return as_file
        return as_file + expand_word(word, cwd)
    if word.startswith("~"):
        word = os.path.expanduser(word)
    path = os.path.normpath(os.path.join(cwd, word))
    out = [path]
    if any(c in word for c in "*?["):
        import glob

        out.extend(os.path.normpath(p) for p in glob.glob(path, recursive=True)[:10000])
    return out


def _past_options(prefix: str, words: list[str]) -> list[str]:
    """``words`` after a prefix word's options (``nice -n 5 cat`` -> ``cat``; ``command -v
    cat`` -> ``cat``): an option is never the program. What follows is still judged as the
    program; an option value that is really a program (``nice -n ./x``: nice refuses a
    value that is not a number) is skipped only where the prefix takes one."""
    values = PREFIX_OPTION_VALUES.get(prefix, frozenset())
    while words and words[0].startswith("-") and words[0] != "-":
        option, words = words[0], words[1:]
        if option == "--":
            break
        if option in values and words:
            words = words[1:]
    return words
