"""The JSON Schemas shipped with the package (``eidolons/data/schemas``).

Validation with :mod:`jsonschema` is for tests, ``eidolons check`` and tooling; the gates'
hot path never imports it (its import alone costs more than a whole verification).
Cross-file ``$ref`` s (``performative.v1.json#/$defs/performative``) resolve against the
packaged files, never the network.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

ENVELOPE_SCHEMAS = {"1": "envelope.v1.json", "2.0": "envelope.v2.json", "2.1": "envelope.v2.1.json"}


def schema_names() -> list[str]:
    folder = resources.files("eidolons").joinpath("data/schemas")
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".json"))


@cache
def load_schema(name: str) -> dict[str, Any]:
    text = resources.files("eidolons").joinpath("data/schemas", name).read_text(encoding="utf-8")
    return json.loads(text)  # type: ignore[no-any-return]


def envelope_schema_name(envelope_version: str) -> str:
    """The schema file for an envelope version: 1.0 -> v1; 1.1, 1.2 and 2.0 -> v2 (the
    upstream v1 file accepts only 1.0, and 1.1/1.2 changed nothing but the version
    pattern, which v2 accepts); 2.1 -> v2.1."""
    if envelope_version.startswith("2.1"):
        return ENVELOPE_SCHEMAS["2.1"]
    if envelope_version.startswith(("2.", "1.1", "1.2")):
        return ENVELOPE_SCHEMAS["2.0"]
    return ENVELOPE_SCHEMAS["1"]


@cache
def _registry() -> Any:
    from referencing import Registry, Resource

    pairs = []
    for name in schema_names():
        resource = Resource.from_contents(load_schema(name))
        pairs.append((name, resource))
        rid = resource.id()
        if rid:
            pairs.append((rid, resource))
    return Registry().with_resources(pairs)


def validation_errors(document: Any, schema: str) -> list[str]:
    """Every violation of ``schema`` (a file name in data/schemas), as readable strings."""
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator(load_schema(schema), registry=_registry())
    return [
        f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
        for e in sorted(validator.iter_errors(document), key=lambda e: list(map(str, e.path)))
    ]
