"""The hot commands' options, declared once for argparse (:func:`add_options`) and for
:func:`fast_parse`, which reads their simple argv without importing argparse (ADR 0022:
``bench/bench_verify.py`` shows the start-up budget needs it).

:func:`fast_parse` answers only when it is sure argparse would answer the same:
positionals not starting with ``-``, options spelled exactly as declared with their
value in the next argument, each non-repeatable option at most once, the declared
positionals and every required option. Anything else (help, ``--``, abbreviations,
``--opt=value``, errors) answers None and goes to the full parser."""

from __future__ import annotations

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence
    from typing import Any

#: the actions a declaration may use (what :func:`fast_parse` knows argparse does)
ACTIONS = ("store", "store_true", "append")


class Option:
    """One argument, in ``add_argument``'s terms: one positional name or the option
    strings, and the keywords of the same name."""

    __slots__ = ("action", "default", "dest", "help", "metavar", "names", "positional", "required")

    def __init__(
        self,
        *names: str,
        action: str = "store",
        dest: str | None = None,
        default: Any = None,
        metavar: str | None = None,
        help: str | None = None,
        required: bool = False,
    ) -> None:
        if action not in ACTIONS:
            raise ValueError(f"action {action!r} is not one of {ACTIONS}")
        positional = not names[0].startswith("-")
        if positional and (len(names) != 1 or action != "store" or required or dest):
            raise ValueError(f"positional {names[0]!r}: one name, action store, no dest")
        self.names = names
        self.positional = positional
        self.action = action
        self.dest = dest or (names[0] if positional else names[0].lstrip("-").replace("-", "_"))
        if action == "store_true" and default is None:
            default = False
        self.default = default
        self.metavar = metavar
        self.help = help
        self.required = required

    def kwargs(self) -> dict[str, Any]:
        """``add_argument``'s keywords for this declaration."""
        out: dict[str, Any] = {}
        if self.action != "store":
            out["action"] = self.action
        if not self.positional and self.dest != self.names[0].lstrip("-").replace("-", "_"):
            out["dest"] = self.dest
        if self.default is not None and not (self.action == "store_true" and not self.default):
            out["default"] = self.default
        for key in ("metavar", "help"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.required:
            out["required"] = True
        return out


class Args:
    """The parsed arguments, as ``argparse.Namespace`` holds them (attributes by dest)."""

    def __init__(self, **values: Any) -> None:
        self.__dict__.update(values)

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in sorted(vars(self).items()))
        return f"Args({inner})"


def add_options(parser: argparse.ArgumentParser, options: Sequence[Option]) -> None:
    """Declare ``options`` on an argparse parser (the full parser: ``--help``, errors)."""
    for option in options:
        parser.add_argument(*option.names, **option.kwargs())


def fast_parse(argv: Sequence[str], options: Sequence[Option]) -> Args | None:
    """``argv`` (after the command name) parsed as argparse would, or None."""
    by_name = {name: o for o in options if not o.positional for name in o.names}
    positionals = [o for o in options if o.positional]
    values: dict[str, Any] = {}
    seen: set[str] = set()
    given: list[str] = []
    i, n = 0, len(argv)
    while i < n:
        arg = argv[i]
        if not arg.startswith("-"):
            given.append(arg)
            i += 1
            continue
        option = by_name.get(arg)
        if option is None:
            return None
        if option.dest in seen and option.action != "append":
            return None
        seen.add(option.dest)
        if option.action == "store_true":
            values[option.dest] = True
            i += 1
            continue
        if i + 1 >= n or argv[i + 1].startswith("-"):
            return None
        if option.action == "append":
            values.setdefault(option.dest, list(option.default or ())).append(argv[i + 1])
        else:
            values[option.dest] = argv[i + 1]
        i += 2
    if len(given) != len(positionals):
        return None
    out = Args()
    for option in options:
        if option.required and option.dest not in seen:
            return None
        if option.positional:
            value: Any = given[positionals.index(option)]
        elif option.dest in values:
            value = values[option.dest]
        elif option.action == "append":
            value = list(option.default) if option.default is not None else None
        else:
            value = option.default
        setattr(out, option.dest, value)
    return out
