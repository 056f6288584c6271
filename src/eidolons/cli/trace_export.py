"""``eidolons trace export --otlp URL [THREAD...]``: one span per hand-off over OTLP/HTTP
(a URL without a path posts to its ``/v1/traces``; THREAD... read as the chain verbs read
PATHs; none: every thread). Exit codes: 0
accepted; 1 nothing to export; 2 usage or no SDK; 3 refused or unreachable."""

from __future__ import annotations

import argparse
import os
import sys

from eidolons._text import plural, printable
from eidolons.cli.common import error, project_root

EXIT_NOTHING = 1
EXIT_REFUSED = 3


def run_export(args: argparse.Namespace) -> int:
    from eidolons import __version__
    from eidolons.io.config import Limits
    from eidolons.trace.chain import sources
    from eidolons.trace.store import open_store

    url = args.otlp
    if getattr(args, "dsn", None):
        return error("--dsn goes with --to postgres, not --otlp")
    if not url.startswith(("http://", "https://")):
        return error(f"--otlp must be an http:// or https:// URL, got {url!r}")
    if not args.timeout > 0:
        return error("--timeout must be a positive number of seconds")
    try:
        from eidolons.trace.chain.otlp import export_hops, traces_endpoint
    except ImportError as exc:
        return error(
            f"the OpenTelemetry SDK is not installed ({exc.name}): pip install 'eidolons[otel]'"
        )
    url = traces_endpoint(url)
    root = project_root(args.root)
    if isinstance(root, int):
        return root
    with open_store(root) as store:
        paths = list(args.threads) or store.threads()
        collected = sources.collect(paths, store, Limits.from_env(os.environ))
        hops = sources.hops(collected, store) if not collected.empty else []
    for problem in collected.problems:
        print(f"eidolons: {printable(problem)}", file=sys.stderr)
    if not hops:
        return error("no hand-off to export", EXIT_NOTHING)
    from eidolons.trace.chain.evidence import check_receipts

    _, trust_problem = check_receipts(hops, root)
    if trust_problem:
        print(f"eidolons: {printable(trust_problem)}", file=sys.stderr)
    accepted, count = export_hops(hops, url, timeout=args.timeout, service_version=__version__)
    if not accepted:
        return error(f"{printable(url)} did not accept the {plural(count, 'span')}", EXIT_REFUSED)
    print(f"exported {plural(count, 'span')} to {printable(url)}", file=sys.stderr)
    return 0
