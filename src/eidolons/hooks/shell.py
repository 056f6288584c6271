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
  resolving to it counts as naming it.
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
    }
)
# words before the program that do not change what it reads
PREFIX_WORDS = frozenset({"command", "builtin", "nice", "nohup", "time", "stdbuf", "ionice"})


class ShellReading:
    """What a command names: ``words`` (candidate operands), ``opaque`` (why it cannot be
    read, or None), whether it runs the gate (``eidolons``) in some segment, and the
    arguments of each such run (``gate_calls``, what follows ``eidolons``)."""

    __slots__ = ("gate_calls", "opaque", "runs_gate", "words")

    def __init__(self) -> None:
        self.words: list[str] = []
        self.opaque: str | None = None
        self.runs_gate = False
        self.gate_calls: list[list[str]] = []


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


def _program_base(word: str) -> str:
    base = os.path.basename(word)
    # python3.11, pypy3.10 -> python3, pypy3
    stem = base.rstrip("0123456789.")
    return stem if stem in OPAQUE_PROGRAMS else base


def read_command(command: str) -> ShellReading:
    import shlex

    out = ShellReading()
    if "$" in command or "`" in command:
        out.opaque = "parameter or command substitution"
    if "<<" in command:
        out.opaque = "a here-document"
    if "<(" in command or ">(" in command:
        out.opaque = "process substitution"
    lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        tokens = list(lexer)
    except ValueError as exc:
        out.opaque = f"the command does not parse ({exc})"
        # still look at the words, split on whitespace
        tokens = command.split()
    segments: list[list[str]] = [[]]
    for token in tokens:
        if token in SEPARATORS or (token and set(token) <= set(";&|()")):
            segments.append([])
        else:
            segments[-1].append(token)
    for segment in segments:
        words = [w for w in segment if w not in REDIRECTS and not _is_redirect(w)]
        while words and "=" in words[0] and not words[0].startswith("="):
            words = words[1:]  # VAR=value prefix
        while words and os.path.basename(words[0]) in PREFIX_WORDS:
            words = words[1:]
        if not words:
            continue
        gate_args = _gate_args(words)
        if gate_args is not None:
            out.runs_gate = True
            out.gate_calls.append(gate_args)
            continue
        program = _program_base(words[0])
        if program in OPAQUE_PROGRAMS and out.opaque is None:
            out.opaque = f"{program} can read files the command does not name"
        if program == "find" and any(w in ("-exec", "-execdir", "-ok", "-okdir") for w in words):
            out.opaque = out.opaque or "find -exec"
        out.words.extend(words[1:] if len(words) > 1 else [])
        out.words.append(words[0])
        out.words.extend(_redirect_targets(segment))
    return out


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
    """The absolute paths a word can name: itself, ``~`` expanded, and glob matches."""
    if not word or (word.startswith("-") and "=" not in word):
        return []
    if word.startswith("-") and "=" in word:  # --file=PATH
        word = word.partition("=")[2]
        if not word:
            return []
    if word.startswith("~"):
        word = os.path.expanduser(word)
    path = os.path.normpath(os.path.join(cwd, word))
    out = [path]
    if any(c in word for c in "*?["):
        import glob

        out.extend(os.path.normpath(p) for p in glob.glob(path, recursive=True)[:10000])
    return out
