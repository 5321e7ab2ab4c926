"""Settings from flags, ``SWITCHBOARD_*`` variables and the ``SWITCHBOARD_CONFIG`` file."""

from __future__ import annotations

import ipaddress
import os
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from registry.settings import ConfigFileError, Settings

DOCS = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith("SWITCHBOARD_")]:
        monkeypatch.delenv(name)


def _config(monkeypatch: pytest.MonkeyPatch, path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
    monkeypatch.setenv("SWITCHBOARD_CONFIG", str(path))


def test_toml_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _config(
        monkeypatch,
        tmp_path / "switchboard.toml",
        'port = 9000\nallow_networks = ["10.0.0.0/8"]\nrequire_signed_cards = true\n'
        'seeds = ["a.toml", "b.toml"]\n',
    )
    settings = Settings()
    assert settings.port == 9000
    assert settings.allow_networks == [ipaddress.ip_network("10.0.0.0/8")]
    assert settings.require_signed_cards is True
    assert settings.seeds == ["a.toml", "b.toml"]
    assert settings.host == "127.0.0.1"  # what the file does not set keeps its default


def test_env_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _config(
        monkeypatch,
        tmp_path / ".env",
        "# Switchboard\nSWITCHBOARD_PORT=9001\n\n"
        'export SWITCHBOARD_ALLOW_NETWORKS="10.0.0.0/8, ::1"\nswitchboard_page_size=20\n',
    )
    settings = Settings()
    assert settings.port == 9001 and settings.page_size == 20
    assert settings.allow_networks == [
        ipaddress.ip_network("10.0.0.0/8"),
        ipaddress.ip_network("::1/128"),
    ]


def test_variables_and_flags_win_over_the_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _config(monkeypatch, tmp_path / "switchboard.toml", 'port = 9000\nhost = "0.0.0.0"\n')
    monkeypatch.setenv("SWITCHBOARD_PORT", "9002")
    assert (Settings().port, Settings().host) == (9002, "0.0.0.0")
    assert Settings(port=9003).port == 9003


def test_a_bad_value_in_the_file_is_a_validation_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _config(monkeypatch, tmp_path / "switchboard.toml", "port = 70000\n")
    with pytest.raises(ValidationError, match="port"):
        Settings()


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("missing.toml", None, "cannot read config file {path} (SWITCHBOARD_CONFIG): No such"),
        ("bad.toml", "port = \n", "config file {path} (SWITCHBOARD_CONFIG) is not valid TOML"),
        ("bad.toml", "prot = 1\n", "unknown setting 'prot' in config file {path}"),
        ("bad.toml", "SWITCHBOARD_PORT = 1\n", "did you mean 'port'?"),
        ("bad.toml", "[server]\nport = 1\n", "unknown setting 'server'"),
        ("bad.env", "SWITCHBOARD_PROT=1\n", "did you mean 'SWITCHBOARD_PORT'?"),
        ("bad.env", "PORT=1\n", "unknown setting 'PORT' in config file {path}"),
        ("bad.env", "\n\nSWITCHBOARD_PORT 1\n", "{path} (SWITCHBOARD_CONFIG): line 3: expected"),
        ("bad.env", b"\xff\xfe", "it is not UTF-8 text"),
    ],
)
def test_bad_files(
    name: str,
    text: str | bytes | None,
    message: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    elif text is not None:
        path.write_text(text, encoding="utf-8")
    monkeypatch.setenv("SWITCHBOARD_CONFIG", str(path))
    with pytest.raises(ConfigFileError) as error:
        Settings()
    assert message.format(path=path) in str(error.value)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    ("kind", "name"), [("toml", "switchboard.toml"), ("sh", "switchboard.env")]
)
def test_the_documented_example_files(
    kind: str, name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The example config files of docs/configuration.md give the same settings."""
    text = DOCS.read_text(encoding="utf-8")
    section = text.split("The same in a config file", 1)[1]
    example = re.findall(rf"```{kind}\n(.*?)```", section, flags=re.S)[0]
    _config(monkeypatch, tmp_path / name, example)
    settings = Settings()
    assert settings.port == 9000
    assert settings.database_url == "sqlite:///./switchboard.db"
    assert settings.allow_networks == [ipaddress.ip_network("10.0.0.0/8")]
    assert settings.seeds == ["seeds/demo.toml"]
