"""registry.dbmetrics: statements are labelled by their kind only."""

from __future__ import annotations

import pytest

from registry.dbmetrics import statement_kind


@pytest.mark.parametrize(
    ("statement", "kind"),
    [
        ("SELECT agents.id FROM agents WHERE agents.id = ?", "select"),
        ("  insert INTO agents (id) VALUES (?)", "insert"),
        ("UPDATE agent_refresh SET status=?", "update"),
        ("DELETE FROM skills WHERE agent_id = ?", "delete"),
        ("BEGIN IMMEDIATE", "other"),
        ("WITH x AS (SELECT 1) SELECT * FROM x", "other"),
        ("selected_secret_table", "other"),
        ("", "other"),
    ],
)
def test_statement_kind(statement: str, kind: str) -> None:
    assert statement_kind(statement) == kind
