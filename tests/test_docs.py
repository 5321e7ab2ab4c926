"""The user docs stay in step with the code: settings, CLI variables and admin API routes."""

from __future__ import annotations

import re
from pathlib import Path

from registry.api import access
from registry.openapi import openapi_document
from registry.settings import Settings
from router.app import create_app
from tests.support.helpers import make_settings

DOCS = Path(__file__).resolve().parent.parent / "docs"
CLI_ONLY = {"SWITCHBOARD_URL"}
CONFIG_FILE = {"SWITCHBOARD_CONFIG"}  # names the file the settings are read from: no setting
_ROW_NAME = re.compile(r"^\|\s*`(SWITCHBOARD_[A-Z0-9_]+)`\s*\|")
_ROUTE = re.compile(r"\b(GET|POST|PUT|PATCH|DELETE) (/api/v1/[^\s`?|)]*)")


def _table_rows(path: Path) -> dict[str, list[str]]:
    """Table rows whose first cell is a backticked ``SWITCHBOARD_*`` name, as name -> cells."""
    rows: dict[str, list[str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        match = _ROW_NAME.match(line)
        if match is None:
            continue
        name = match.group(1)
        assert name not in rows, f"{name} is documented twice in {path.name}"
        rows[name] = [cell.strip() for cell in line.strip().strip("|").split("|")]
    return rows


def _settings_variables() -> dict[str, str]:
    prefix = Settings.model_config.get("env_prefix", "")
    return {f"{prefix}{name}".upper(): name for name in Settings.model_fields}


def test_configuration_documents_every_variable() -> None:
    documented = set(_table_rows(DOCS / "configuration.md"))
    expected = set(_settings_variables()) | CLI_ONLY | CONFIG_FILE
    assert documented - expected == set(), "documented but not a setting"
    assert expected - documented == set(), "settings missing from docs/configuration.md"


def test_configuration_defaults_match_settings() -> None:
    """Scalar defaults appear, in backticks, in the row's Default column."""
    rows = _table_rows(DOCS / "configuration.md")
    header = next(
        line
        for line in (DOCS / "configuration.md").read_text(encoding="utf-8").splitlines()
        if line.startswith("| Variable")
    )
    column = [cell.strip() for cell in header.strip().strip("|").split("|")].index("Default")
    for variable, field in _settings_variables().items():
        default = Settings.model_fields[field].default
        if isinstance(default, bool) or not isinstance(default, str | int | float):
            continue
        assert variable in rows, f"{variable} is not documented"
        assert f"`{default}`" in rows[variable][column], f"{variable}: default is {default!r}"


def test_admin_api_documents_every_route(sqlite_url: str) -> None:
    text = (DOCS / "admin-api.md").read_text(encoding="utf-8")
    app = create_app(make_settings(sqlite_url))  # its routes; nothing is opened
    routes = {
        f"{method.upper()} {path}"
        for path, item in openapi_document(app, access)["paths"].items()
        for method in item
        if method != "parameters"
    }
    missing = sorted(route for route in routes if route not in text)
    assert missing == [], f"routes missing from docs/admin-api.md: {missing}"
    unknown = sorted({f"{m} {p}" for m, p in _ROUTE.findall(text)} - routes)
    assert unknown == [], f"docs/admin-api.md names routes the API does not have: {unknown}"
