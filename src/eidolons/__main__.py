"""``python -m eidolons``: as ``bin/eidolons`` (the same last resort when the CLI cannot
be imported: one line and exit 70, the hook's deny for ``hook``; ADR 0022)."""

import sys

try:
    from eidolons.cli.main import main
except BaseException as exc:
    hook = sys.argv[1:2] == ["hook"]
    why = f"internal error: {exc.__class__.__name__}: {exc}"
    print(f"eidolons hook: denied ({why})" if hook else f"eidolons: {why}", file=sys.stderr)
    sys.exit(2 if hook else 70)

sys.exit(main())
