"""Loading the contract sets the receiver gate decides with (ECL §3, ADR 0002): a missing
or broken contract must never let a hand-off through.

1. **Sources**, lowest precedence first: the builtin set (``data/contracts/index.json``,
   compiled so no YAML parser is imported for it), ``<root>/.eidolons/contracts/`` if it
   exists, then each ``--contracts DIR`` in order; a later contract for an edge narrows
   the earlier one (:meth:`Contract.narrowed_by`). No builtin edge can be deleted.
2. **Directory entries**: the top level only, in sorted order. ``*.yaml`` is a contract;
   ``.yml`` or another spelling of ``.yaml`` is an error (an override that silently did
   nothing would leave a wider contract in force; one edge, one possible file name);
   dot-files and other names are ignored. An entry that is a link or not a regular file
   is an error (``O_NOFOLLOW``, then ``fstat``).
3. **Bytes and content**: :func:`eidolons.ecl.contract.parse_contract_bytes` (one safe
   YAML document, the generated schema validator, unique kinds); then the file must be
   named ``<from>-to-<to>.yaml`` after its own content (:func:`load_contract_file`).
4. **Fail closed**: any invalid file in any source makes the whole load raise
   :class:`ContractError` naming it, so no hand-off is decided with a partly broken set.
"""

from __future__ import annotations

import errno
import os

from eidolons.ecl.contract import (
    BUILTIN_SOURCE,
    INDEX_FORMAT,
    MAX_CONTRACT_BYTES,
    Contract,
    ContractArtifact,
    ContractError,
    ContractSetUnavailable,
    edge_key,
    index_contract,
    index_entries,
    parse_contract_bytes,
)
from eidolons.ecl.contract import ContractSet as _PureContractSet
from eidolons.io import paths as pathstr

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path
    from typing import Any

    from eidolons.io.paths import StrPath

__all__ = [
    "BUILTIN_SOURCE",
    "INDEX_FORMAT",
    "MAX_CONTRACT_BYTES",
    "Contract",
    "ContractArtifact",
    "ContractError",
    "ContractSet",
    "ContractSetUnavailable",
    "edge_key",
    "load_builtin_contracts",
    "load_contract_dir",
    "load_contract_file",
    "load_contracts",
    "parse_contract_bytes",
    "project_contract_dir",
]

_INDEX_PACKAGE = "eidolons"
_INDEX_PATH = ("data", "contracts", "index.json")


# --------------------------------------------------------------------------- files


def _read_regular_file(path: Path) -> bytes:
    """Read ``path`` refusing links and non-regular files, at most the size cap + 1."""
    from eidolons.io.files import read_regular

    try:
        return read_regular(path, MAX_CONTRACT_BYTES)
    except OSError as exc:
        if exc.errno == errno.ELOOP or path.is_symlink():
            raise ContractError(
                str(path), "is a symbolic link; contract files must be regular files"
            ) from None
        if exc.errno == errno.EINVAL:
            raise ContractError(str(path), "not a regular file") from None
        raise ContractError(str(path), f"cannot read: {exc.strerror or exc}") from None


def load_contract_file(path: Path) -> Contract:
    """Load one contract file; its name must be ``<from>-to-<to>.yaml`` from its content."""
    source = str(path)
    contract = parse_contract_bytes(_read_regular_file(path), source)
    if path.name != contract.file_name:
        raise ContractError(
            source,
            f"file name must be {contract.file_name!r} for an edge from {contract.from_!r} "
            f"to {contract.to!r}",
        )
    return contract


def _is_yaml_like(name: str) -> bool:
    return name.lower().endswith((".yaml", ".yml"))


def load_contract_dir(directory: Path) -> list[Contract]:
    """Load every contract of one directory (rule 2 of the module docstring), sorted by name.

    Raises :class:`ContractError` for a missing directory or any invalid entry.
    """
    import stat

    try:
        st = os.stat(directory)
    except FileNotFoundError:
        raise ContractError(str(directory), "contracts directory does not exist") from None
    except OSError as exc:  # a name too long, a loop of links...: no contracts read from it
        raise ContractError(str(directory), f"cannot read: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise ContractError(str(directory), "not a directory")
    try:
        with os.scandir(directory) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError as exc:
        raise ContractError(str(directory), f"cannot list: {exc.strerror or exc}") from None
    contracts: list[Contract] = []
    for entry in entries:
        name = entry.name
        if name.startswith(".") or not _is_yaml_like(name):
            continue
        path = directory / name
        if not name.endswith(".yaml"):
            raise ContractError(
                str(path), "contract files must be named <from>-to-<to>.yaml (lowercase .yaml)"
            )
        if entry.is_symlink():
            raise ContractError(
                str(path), "is a symbolic link; contract files must be regular files"
            )
        if not entry.is_file(follow_symlinks=False):
            raise ContractError(str(path), "not a regular file")
        contracts.append(load_contract_file(path))
    return contracts


def project_contract_dir(root: StrPath) -> Path:
    """Where a project keeps its own contracts: ``<root>/.eidolons/contracts``."""
    from pathlib import Path

    return Path(_project_dir(root))


def _project_dir(root: StrPath) -> str:
    return pathstr.join(root, ".eidolons", "contracts")


# --------------------------------------------------------------------------- builtin


_INDEX: list[dict[str, Any]] = []  # the shipped index's entries, read once per process


def _builtin_index() -> dict[str, Any]:
    """The shipped index's entries (``data/contracts/index.json``: no YAML import needed),
    read beside this module (``importlib.resources`` costs more than the read: a package
    that is not on a file system, a zip, falls back to it). Raises :class:`ContractError`."""
    if not _INDEX:
        source = f"{BUILTIN_SOURCE} ({'/'.join(_INDEX_PATH)})"
        try:
            raw = _read_index()
        except OSError as exc:
            raise ContractError(source, f"cannot read the shipped contract index: {exc}") from None
        _INDEX.append(index_entries(raw, source))
    return _INDEX[0]


def load_builtin_contracts() -> tuple[Contract, ...]:
    """Every shipped contract, built without validating each entry again (ADR 0022: they
    were validated when the index was built, and the tests prove the two agree)."""
    return tuple(index_contract(key, entry) for key, entry in _builtin_index().items())


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # eidolons/


def _read_index() -> bytes:
    path = os.path.join(_PACKAGE_DIR, *_INDEX_PATH)
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        if os.path.isdir(_PACKAGE_DIR):
            raise  # a package on disk without its index: damaged, fail closed
    from importlib import resources  # a package imported from a zip

    return resources.files(_INDEX_PACKAGE).joinpath(*_INDEX_PATH).read_bytes()


# --------------------------------------------------------------------------- sets


class ContractSet(_PureContractSet):
    """The effective contracts (:class:`eidolons.ecl.contract.ContractSet`) with the
    loaders that read them from the package and the project."""

    @classmethod
    def builtin(cls) -> ContractSet:
        """Only the shipped contracts."""
        return cls((), [BUILTIN_SOURCE], index=_builtin_index())

    @classmethod
    def load(cls, root: StrPath | None = None, extra_dirs: Sequence[StrPath] = ()) -> ContractSet:
        """Builtin, then ``<root>/.eidolons/contracts`` if present, then ``extra_dirs``.

        Raises :class:`ContractError` if any source is invalid (fail closed), or if an
        entry of ``extra_dirs`` does not exist. A missing project directory is fine: most
        projects have none.
        """
        contracts: list[Contract] = []
        sources = [BUILTIN_SOURCE]
        directories: list[StrPath] = []
        if root is not None:
            project = _project_dir(root)
            if os.path.lexists(project):  # a dangling link too: loading it refuses
                directories.append(project)
        directories.extend(extra_dirs)
        if directories:  # pathlib only for a project's own contracts (most have none)
            from pathlib import Path

            for directory in directories:
                contracts.extend(load_contract_dir(Path(directory)))
                sources.append(str(Path(directory)))
        return cls(contracts, sources, index=_builtin_index())


def load_contracts(root: StrPath, dirs: Sequence[StrPath]) -> ContractSet | ContractSetUnavailable:
    """The one contract loader of the commands: the effective set (builtin, the project's,
    ``--contracts DIR``...), or the typed failure of loading it, with which the gates
    refuse every hand-off (fail closed; never an allow)."""
    try:
        return ContractSet.load(root, dirs)
    except ContractError as exc:
        return ContractSetUnavailable(exc)
