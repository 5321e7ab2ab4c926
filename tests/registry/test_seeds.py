"""Seed files: format validation, loading at start, idempotence."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from registry.api import REGISTRY
from registry.errors import RegistryError
from registry.seedfile import SeedAgent, SeedKey, load_seed_file
from router.app import create_app
from tests.support.helpers import CardServer, card_v03, card_v1, make_settings


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "seeds.toml"
    path.write_text(text)
    return path


def test_valid_file(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        '[[agents]]\nurl = "https://a.example"\nid = "a"\n\n[[agents]]\ncard_file = "c.json"\n'
        '\n[[keys]]\njwk = { kty = "OKP", crv = "Ed25519", x = "abc" }\n'
        '\n[[keys]]\njwks_url = "https://a.example/jwks.json"\n',
    )
    seeds = load_seed_file(path)
    assert seeds.agents == [
        SeedAgent(url="https://a.example", id="a"),
        SeedAgent(card_file=tmp_path / "c.json"),
    ]
    assert seeds.keys == [
        SeedKey(jwk={"kty": "OKP", "crv": "Ed25519", "x": "abc"}),
        SeedKey(jwks_url="https://a.example/jwks.json"),
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[[agents]\n", "not valid TOML"),
        ('[[agent]]\nurl = "x"\n', "unknown top-level key 'agent'"),
        ('agents = "x"\n', "agents must be [[agents]] tables"),
        ('[[agents]]\nurl = "x"\ncolor = "red"\n', "agents[0]: unknown key 'color'"),
        ('[[agents]]\nid = "x"\n', "agents[0]: give exactly one of url or card_file"),
        ("[[agents]]\nurl = 5\n", "agents[0]: url must be a non-empty string"),
        (
            '[[agents]]\nurl = "x"\nrefresh_interval = 3e6\n',
            "agents[0]: refresh_interval must be a number of seconds, 1 to 2592000",
        ),
    ],
)
def test_invalid_files_name_the_entry(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(RegistryError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_seed_file(_write(tmp_path, text))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(RegistryError, match="cannot read seed file"):
        load_seed_file(tmp_path / "nope.toml")


async def test_seeds_load_at_start_and_again_without_duplicates(
    aiohttp_client: Any, sqlite_url: str, card_server: CardServer, tmp_path: Path
) -> None:
    card_server.set("/.well-known/agent-card.json", card_v1(card_server.url()))
    (tmp_path / "inv.json").write_text(json.dumps(card_v03("https://inv.example")))
    path = _write(
        tmp_path,
        f'[[agents]]\nurl = "{card_server.url()}"\nid = "wx"\n\n'
        '[[agents]]\ncard_file = "inv.json"\n\n'
        '[[agents]]\nurl = "http://127.0.0.1:1"\n',  # unreachable: logged and skipped
    )
    settings = make_settings(sqlite_url, seeds=[str(path)])
    client = await aiohttp_client(create_app(settings))
    assert sorted(client.app[REGISTRY].catalog.snapshot.agents) == ["invoice-reader", "wx"]
    await client.close()

    again = await aiohttp_client(create_app(settings))  # a restart on the same database
    assert sorted(again.app[REGISTRY].catalog.snapshot.agents) == ["invoice-reader", "wx"]
    assert card_server.hits("/.well-known/agent-card.json") == 1  # not fetched again


async def test_seed_urls_are_logged_without_credentials(
    aiohttp_client: Any, sqlite_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _write(tmp_path, '[[agents]]\nurl = "http://user:hunter2@127.0.0.1:1/"\n')
    with caplog.at_level("INFO"):
        await aiohttp_client(create_app(make_settings(sqlite_url, seeds=[str(path)])))
    assert "not registered" in caplog.text
    assert "hunter2" not in caplog.text
