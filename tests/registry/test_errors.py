"""Numbers in error messages."""

from __future__ import annotations

import pytest

from registry.errors import number


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (2592000.0, "2592000"),
        (30 * 86400, "2592000"),
        (1.0, "1"),
        (0.0, "0"),
        (-3.0, "-3"),
        (0.5, "0.5"),
        (2592000.5, "2592000.5"),
        (1e20, "100000000000000000000"),
        (0.1, "0.1"),
    ],
)
def test_whole_numbers_read_as_integers(value: float, shown: str) -> None:
    assert number(value) == shown
