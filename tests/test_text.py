"""The small words every message shares (``eidolons._text``)."""

from __future__ import annotations

import pytest

from eidolons._text import did_you_mean, plural


@pytest.mark.parametrize(
    ("n", "noun", "nouns", "text"),
    [
        (0, "hop", None, "0 hops"),
        (1, "hop", None, "1 hop"),
        (2, "hop", None, "2 hops"),
        (1, "entry", "entries", "1 entry"),
        (3, "entry", "entries", "3 entries"),
    ],
)
def test_a_count_and_its_noun_agree(n: int, noun: str, nouns: str | None, text: str) -> None:
    assert plural(n, noun, nouns) == text


def test_the_nearest_name_is_suggested_only_when_close() -> None:
    assert did_you_mean("vigl", {"vigil", "atlas"}) == " (did you mean 'vigil'?)"
    assert did_you_mean("zzzz", {"vigil", "atlas"}) == ""
