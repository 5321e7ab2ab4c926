"""router.choose.choice: a candidate changed with ``but`` equals one made with those fields."""

from __future__ import annotations

from dataclasses import replace

import pytest

from router.choose.choice import Candidate


def test_but_changes_the_named_fields_only() -> None:
    found = Candidate("a", "s", 0.5, True, "", "http://a/", "1.0", binding="GRPC")
    changed = found.but(kept=False, reason="below the floor", features={"skill": 0.5})
    assert changed == replace(found, kept=False, reason="below the floor", features={"skill": 0.5})
    assert found.kept and found.reason == "" and found.features is None
    with pytest.raises(AttributeError):
        changed.kept = True  # type: ignore[misc]  # still frozen


def test_but_refuses_an_unknown_field() -> None:
    with pytest.raises(TypeError, match="scores"):
        Candidate("a", None, 0.0, True, "").but(scores=1.0)
