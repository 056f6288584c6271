"""Install (and remove) rendered verify-incoming skills where hosts and the nexus read them
(ADR 0019). For a receiver ``R``:

1. ``.claude/skills/R-verify-incoming/SKILL.md`` and ``.agents/skills/...`` always.
2. The member tree, when ``.eidolons/R/`` is a real directory holding a member marker:
   ``skills/verify-incoming/SKILL.md`` for EIIS 3.x (or no version and that directory
   present), else the flat ``skills/verify-incoming.md``.
3. Every target gets the same bytes (:func:`~eidolons.hosts.skills.render.render_skill`).
4. A target is written only when absent or generated and unchanged
   (:func:`~eidolons.hosts.skills.render.generated_state`); anything else is refused
   unless ``force``; a link to the member-tree target is ``linked``; nothing is written
   where the directory resolves outside the root, even with ``force``.
5. Writes are atomic; a refused target never stops the others.
6. Removal deletes only generated, unchanged files (``force``: edited ones too), then the
   skill directories left empty.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from eidolons.hosts.skills.render import generated_state, render_skill, skill_name
from eidolons.io.files import atomic_write, read_regular, read_text, readable_mode
from eidolons.io.paths import realpath

if TYPE_CHECKING:
    from eidolons.io.contracts import ContractSet

MAX_SKILL_BYTES = 1024 * 1024
MEMBER_MARKERS = (
    "EIIS_VERSION",
    "install.manifest.json",
    "manifest.json",
    "PERSONA.md",
    "SPEC.md",
    "skills",
)
HOST_SKILL_DIRS = (Path(".claude") / "skills", Path(".agents") / "skills")

WRITTEN, UPDATED, UNCHANGED = "written", "updated", "unchanged"
LINKED, REFUSED, REMOVED, KEPT = "linked", "refused", "removed", "kept"


@dataclass(frozen=True)
class Target:
    """One place a receiver's skill goes: ``layout`` is ``claude-code``, ``agents``,
    ``eiis-3`` or ``eiis-flat``; ``path`` is absolute."""

    receiver: str
    layout: str
    path: Path


@dataclass(frozen=True)
class SkillAction:
    """What was (or, in a dry run, would be) done to one target, and why."""

    target: Target
    status: str
    reason: str = ""

    @property
    def changed(self) -> bool:
        return self.status in (WRITTEN, UPDATED, REMOVED)

    def to_dict(self, root: Path) -> dict[str, str]:
        path = self.target.path
        return {
            "receiver": self.target.receiver,
            "layout": self.target.layout,
            "path": str(path.relative_to(root) if path.is_relative_to(root) else path),
            "status": self.status,
            "reason": self.reason,
        }


# --------------------------------------------------------------------------- targets


def _member_dir(root: Path, receiver: str) -> Path | None:
    member = root / ".eidolons" / receiver
    try:
        if not stat.S_ISDIR(os.lstat(member).st_mode):
            return None
    except OSError:
        return None
    if any((member / marker).exists() for marker in MEMBER_MARKERS):
        return member
    return None


def _major(version: object) -> int | None:
    if not isinstance(version, str):
        return None
    head = version.strip().lstrip("vV").split(".", 1)[0]
    return int(head) if head.isdigit() else None


def _eiis_major(member: Path) -> int | None:
    try:
        major = _major((read_text(member / "EIIS_VERSION") or "")[:64])
        if major is not None:
            return major
    except (OSError, UnicodeDecodeError):
        pass
    for name in ("install.manifest.json", "manifest.json"):
        try:
            doc = json.loads(read_text(member / name, MAX_SKILL_BYTES) or "null")
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict):
            major = _major(doc.get("eiis_version"))
            if major is not None:
                return major
    return None


def _all_targets(root: Path, receiver: str) -> list[Target]:
    """Every place a skill of ``receiver``'s may be: both member layouts, then the hosts'."""
    skills = root / ".eidolons" / receiver / "skills"
    name = skill_name(receiver)
    return [
        Target(receiver, "eiis-3", skills / "verify-incoming" / "SKILL.md"),
        Target(receiver, "eiis-flat", skills / "verify-incoming.md"),
        Target(receiver, "claude-code", root / HOST_SKILL_DIRS[0] / name / "SKILL.md"),
        Target(receiver, "agents", root / HOST_SKILL_DIRS[1] / name / "SKILL.md"),
    ]


def skill_targets(root: Path, receiver: str) -> list[Target]:
    """Where ``receiver``'s skill goes under ``root`` (module rules 1-2), member tree first."""
    eiis3, flat, *hosts = _all_targets(root, receiver)
    member = _member_dir(root, receiver)
    if member is None:
        return hosts
    major = _eiis_major(member)
    if major is None:  # no version recorded: a skill directory says 3.x
        major = 3 if eiis3.path.parent.is_dir() else 1
    return [eiis3 if major >= 3 else flat, *hosts]


# --------------------------------------------------------------------------- reading


def _inside(path: Path, root: Path) -> bool:
    """True if the deepest existing ancestor of ``path`` (a dangling link counts as
    existing) resolves inside ``root``."""
    real_root = Path(realpath(root))
    probe = path
    while not os.path.lexists(probe) and probe != probe.parent:
        probe = probe.parent
    real = Path(realpath(probe))
    return real == real_root or real_root in real.parents


def _existing_state(target: Target, siblings: Sequence[Target]) -> tuple[str, str]:
    """(state, reason) of what is at ``target.path`` now: ``absent``, ``generated``,
    ``modified``, ``foreign``, ``linked`` (a link to a sibling target) or ``other``."""
    try:
        st = os.lstat(target.path)
    except FileNotFoundError:
        return "absent", ""
    except OSError as exc:
        return "other", f"cannot inspect: {exc.strerror or exc}"
    if stat.S_ISLNK(st.st_mode):
        real = Path(realpath(target.path))
        if any(s.path != target.path and Path(realpath(s.path)) == real for s in siblings):
            return "linked", f"a link to {real}"
        return "foreign", "a symbolic link this tool did not make"
    if not stat.S_ISREG(st.st_mode):
        return "other", "not a regular file"
    try:
        data = read_regular(target.path, MAX_SKILL_BYTES)
    except OSError as exc:
        return "other", f"cannot read: {exc.strerror or exc}"
    state = generated_state(data)
    reasons = {
        "foreign": "not generated by eidolons",
        "modified": "generated by eidolons but edited since",
    }
    return state, reasons.get(state, "")


# --------------------------------------------------------------------------- install


def install_actions(
    root: Path,
    receivers: Sequence[str],
    contract_set: ContractSet,
    *,
    force: bool = False,
    dry_run: bool = False,
) -> list[SkillAction]:
    """Render and install each receiver's skill (module rules 3-5); every target's action,
    in order. Raises :class:`SkillError` (before writing anything) if a receiver cannot be
    rendered."""
    rendered = [(r, render_skill(r, contract_set)) for r in receivers]
    actions: list[SkillAction] = []
    for receiver, data in rendered:
        targets = skill_targets(root, receiver)
        for target in targets:
            inside = _inside(target.path.parent, root)  # else nothing there is even read
            state, reason = _existing_state(target, targets) if inside else ("", "")
            if not inside:
                action = SkillAction(target, REFUSED, "its directory resolves outside the root")
            elif state == "absent":
                action = SkillAction(target, WRITTEN)
            elif state == "linked":
                action = SkillAction(target, LINKED, reason)
            elif state == "generated":
                try:
                    same = read_regular(target.path, MAX_SKILL_BYTES) == data
                except OSError:
                    same = False
                action = SkillAction(target, UNCHANGED if same else UPDATED)
            elif force and state in ("foreign", "modified"):
                action = SkillAction(target, UPDATED, f"{reason}; replaced (--force)")
            else:
                hint = "" if state == "other" else " (use --force to replace it)"
                action = SkillAction(target, REFUSED, reason + hint)
            if action.status in (WRITTEN, UPDATED) and not dry_run:
                try:  # a target that fails to write becomes refused
                    atomic_write(target.path, data, readable_mode() & 0o644)
                except OSError as exc:
                    action = SkillAction(target, REFUSED, f"cannot write: {exc.strerror or exc}")
            actions.append(action)
    return actions


# --------------------------------------------------------------------------- uninstall


def _installed_receivers(root: Path) -> list[str]:
    """Receivers with a skill file in one of the known places (for removal of them all)."""
    found: set[str] = set()
    suffix = "-verify-incoming"
    for base in HOST_SKILL_DIRS:
        for entry in sorted((root / base).glob(f"*{suffix}")):
            found.add(entry.name[: -len(suffix)])
    eidolons_dir = root / ".eidolons"
    for pattern in ("*/skills/verify-incoming.md", "*/skills/verify-incoming/SKILL.md"):
        for entry in eidolons_dir.glob(pattern):
            found.add(entry.relative_to(eidolons_dir).parts[0])
    return sorted(r for r in found if r)


def uninstall_actions(
    root: Path, receivers: Sequence[str] | None, *, force: bool = False, dry_run: bool = False
) -> list[SkillAction]:
    """Remove each receiver's skills (module rule 6), every layout whatever the member's
    version is now; every target's action, in order."""
    names = list(receivers) if receivers is not None else _installed_receivers(root)
    actions: list[SkillAction] = []
    for target in [t for receiver in names for t in _all_targets(root, receiver)]:
        state, reason = _existing_state(target, ())
        if state == "absent":
            continue
        if not _inside(target.path.parent, root):
            action = SkillAction(target, KEPT, "its directory resolves outside the root")
        elif state == "generated" or (state == "modified" and force):
            action = SkillAction(target, REMOVED, reason)
        else:
            hint = " (use --force to remove it)" if state == "modified" else ""
            action = SkillAction(target, KEPT, reason + hint)
        if action.status == REMOVED and not dry_run:
            try:
                target.path.unlink()
                if target.path.parent.name.endswith("verify-incoming"):
                    with contextlib.suppress(OSError):  # not empty (someone else's file)
                        target.path.parent.rmdir()
            except OSError as exc:
                action = SkillAction(target, KEPT, f"cannot remove: {exc.strerror}")
        actions.append(action)
    return actions
