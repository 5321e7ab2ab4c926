"""The signing commands: ``keys generate``, ``card sign``, ``card verify``; ``card fetch``.

They need no Switchboard server; the ``jku`` and ``--jwks URL`` cases fetch from a local
aiohttp server, with the sync CLI run in a thread.
"""

from __future__ import annotations

import asyncio
import json
import stat
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from jwcrypto.jwk import JWK

from router.cli import main
from router.cli.cards import FetchError, fetch_json
from router.cli.keys import public_keys
from seeds.demo_agents import DemoAgents
from tests.support.helpers import FIXTURES, CardServer, card_v1

ALGS = ("ES256", "RS256", "EdDSA")


def cli(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    """Run the CLI; return (status, stdout, stderr)."""
    status = main([str(arg) for arg in argv])
    out, err = capsys.readouterr()
    return status, out, err


async def cli_thread(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    """Run the CLI in a thread, so that a server on this event loop can answer it."""
    status = await asyncio.to_thread(main, [str(arg) for arg in argv])
    out, err = capsys.readouterr()
    return status, out, err


def one_error_line(err: str) -> str:
    assert "Traceback" not in err and err.startswith("switchboard: ") and err.count("\n") == 1, err
    return err.strip()


def generate(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str, alg: str = "ES256"
) -> tuple[Path, Path, str]:
    """``keys generate --out tmp_path/name``: (private path, public path, kid)."""
    status, out, err = cli(capsys, "keys", "generate", "--alg", alg, "--out", tmp_path / name)
    assert status == 0 and err == "", err
    kid = out.splitlines()[0].removeprefix("kid: ")
    return tmp_path / f"{name}.jwk", tmp_path / f"{name}.jwks.json", kid


def write_card(tmp_path: Path, card: dict[str, Any], name: str = "card.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(card, ensure_ascii=False), encoding="utf-8")
    return path


def sign(capsys: pytest.CaptureFixture[str], card: Path, key: Path, *extra: str) -> dict[str, Any]:
    status, out, err = cli(capsys, "card", "sign", card, "--key", key, *extra)
    assert status == 0, err
    return json.loads(out)


@pytest.mark.parametrize("alg", ALGS)
def test_generate_sign_verify_round_trip(
    alg: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status, out, err = cli(capsys, "keys", "generate", "--alg", alg, "--out", tmp_path / "owner")
    assert status == 0 and err == ""
    private_path, public_path = tmp_path / "owner.jwk", tmp_path / "owner.jwks.json"
    kid = out.splitlines()[0].removeprefix("kid: ")
    assert str(private_path) in out and str(public_path) in out

    private = json.loads(private_path.read_text())
    key = JWK(**private)
    assert key.has_private and private["alg"] == alg and private["use"] == "sig"
    assert kid == private["kid"] == key.thumbprint()  # the default kid
    for secret in ("d", "p", "q", "dp", "dq", "qi"):
        if secret in private:
            assert private[secret] not in out  # never printed
    assert stat.S_IMODE(private_path.stat().st_mode) == 0o600
    jwks = json.loads(public_path.read_text())
    assert [k["kid"] for k in jwks["keys"]] == [kid]
    assert not JWK(**jwks["keys"][0]).has_private

    card = write_card(tmp_path, card_v1("https://agent.example", name="Übersetzer — 翻訳"))
    status, out, err = cli(capsys, "card", "sign", card, "--key", private_path)
    assert status == 0 and err == "", err
    assert "Übersetzer — 翻訳" in out and out.startswith('{\n  "name"')  # indent 2, not escaped
    signed = write_card(tmp_path, json.loads(out), "signed.json")

    status, out, err = cli(capsys, "card", "verify", signed, "--jwks", public_path)
    assert (status, out, err) == (0, f"verified: kid={kid} form=rfc8785\n", "")

    status, out, _ = cli(capsys, "card", "verify", signed, "--jwks", public_path, "--json")
    assert status == 0
    assert json.loads(out) == {
        "status": "verified",
        "kid": kid,
        "reason": None,
        "key_source": str(public_path),
        "payload_form": "rfc8785",
        "uncovered_fields": [],
    }


def test_generate_names_files_after_the_kid_and_refuses_to_overwrite(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    status, out, _ = cli(capsys, "keys", "generate", "--kid", "owner-2025")
    assert status == 0 and out.splitlines()[0] == "kid: owner-2025"
    private, public = tmp_path / "owner-2025.jwk", tmp_path / "owner-2025.jwks.json"
    before = private.read_text(), public.read_text()
    assert json.loads(before[0])["kid"] == "owner-2025"

    status, _, err = cli(capsys, "keys", "generate", "--kid", "owner-2025")
    assert status == 2
    assert "owner-2025.jwk and owner-2025.jwks.json already exist" in one_error_line(err)
    assert (private.read_text(), public.read_text()) == before  # untouched

    public.unlink()  # one of the two is enough to refuse
    status, _, err = cli(capsys, "keys", "generate", "--kid", "owner-2025")
    assert status == 2 and "owner-2025.jwk already exists" in one_error_line(err)
    assert not public.exists()

    status, _, err = cli(capsys, "keys", "generate", "--kid", "owner-2025", "--alg", "EdDSA")
    assert status == 2
    status, _, err = cli(
        capsys, "keys", "generate", "--kid", "owner-2025", "--alg", "EdDSA", "--force"
    )
    assert status == 0, err
    assert json.loads(private.read_text())["kty"] == "OKP"
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert json.loads(public.read_text())["keys"][0]["kid"] == "owner-2025"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "owner-2025.jwk",
        "owner-2025.jwks.json",
    ]  # no temporary files left


def test_generate_refuses_a_kid_that_is_no_file_name(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status, _, err = cli(capsys, "keys", "generate", "--kid", "../escape")
    assert status == 2 and "--out" in one_error_line(err)
    status, out, _ = cli(capsys, "keys", "generate", "--kid", "../x", "--out", tmp_path / "k")
    assert status == 0 and out.splitlines()[0] == "kid: ../x"
    status, _, err = cli(capsys, "keys", "generate", "--out", tmp_path / "missing" / "k")
    assert status == 2 and "cannot write" in one_error_line(err)


def test_sign_options_and_dropped_values(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    private, public, _ = generate(capsys, tmp_path, "k")
    card = card_v1("https://agent.example")
    card["iconUrl"] = ""
    card["capabilities"]["pushNotifications"] = False
    card["skills"][0]["examples"] = [""]
    path = write_card(tmp_path, card)

    out_path = tmp_path / "out" / "signed.json"
    out_path.parent.mkdir()
    status, out, err = cli(
        capsys,
        "card",
        "sign",
        path,
        "--key",
        private,
        "--kid",
        "other-kid",
        "--jku",
        "https://agent.example/jwks.json",
        "--out",
        out_path,
    )
    assert status == 0
    assert out == f"signed {path} with kid other-kid: wrote {out_path}\n"
    assert err == (
        "dropped empty or false values before signing (the signed card leaves them out): "
        "capabilities.pushNotifications, skills[0].examples, iconUrl\n"
    )
    signed = json.loads(out_path.read_text(encoding="utf-8"))
    assert "iconUrl" not in signed and len(signed["signatures"]) == 1

    # the kid given is in the header: the key's own kid no longer finds it
    status, out, _ = cli(capsys, "card", "verify", out_path, "--jwks", public)
    assert status == 1 and out.startswith("untrusted-key: no key with kid 'other-kid'")

    # a clean card: nothing said on stderr; signing again appends a second signature
    status, out, err = cli(capsys, "card", "sign", out_path, "--key", private)
    assert status == 0 and err == ""
    twice = write_card(tmp_path, json.loads(out), "twice.json")
    assert len(json.loads(out)["signatures"]) == 2
    status, out, _ = cli(capsys, "card", "verify", twice, "--jwks", public)
    assert status == 0 and out.startswith("verified: ")


def test_tampered_card_is_invalid(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    private, public, _ = generate(capsys, tmp_path, "k")
    signed = sign(capsys, write_card(tmp_path, card_v1("https://agent.example")), private)
    signed["skills"][0]["description"] = "Something else entirely."
    path = write_card(tmp_path, signed, "tampered.json")
    status, out, err = cli(capsys, "card", "verify", path, "--jwks", public)
    assert status == 1 and err == ""
    assert out.startswith("invalid: the signature does not match the card's content")


def test_wrong_key_is_untrusted(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    private, _, kid = generate(capsys, tmp_path, "signer")
    _, other_public, _ = generate(capsys, tmp_path, "other")
    signed = sign(capsys, write_card(tmp_path, card_v1("https://agent.example")), private)
    path = write_card(tmp_path, signed, "signed.json")
    status, out, _ = cli(capsys, "card", "verify", path, "--jwks", other_public)
    assert status == 1
    assert out == f"untrusted-key: no key with kid {kid!r} in {other_public}\n"


def test_unsigned_card(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    _, public, _ = generate(capsys, tmp_path, "k")
    path = write_card(tmp_path, card_v1("https://agent.example"))
    status, out, _ = cli(capsys, "card", "verify", path, "--jwks", public)
    assert (status, out) == (1, "unsigned: the card has no signatures\n")


def test_sdk_signed_card_shows_form_and_uncovered_fields(
    capsys: pytest.CaptureFixture[str],
) -> None:
    cards = FIXTURES / "cards"
    status, out, _ = cli(
        capsys, "card", "verify", cards / "signed_card_v1.json", "--jwks", cards / "jwks_v1.json"
    )
    assert status == 0
    assert out == (
        "verified: kid=echo-key-1 form=a2a-sdk-1.x\n"
        "not covered by the signature: preferredTransport, protocolVersion, url\n"
    )
    status, out, _ = cli(
        capsys,
        "card",
        "verify",
        cards / "signed_card_v03_nonascii.json",
        "--jwks",
        cards / "jwks_v03_nonascii.json",
    )
    assert status == 0 and out.startswith("verified: kid=übersetzer-key-1 form=a2a-sdk-0.3\n")


def test_sign_refuses_unusable_keys_and_files_in_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    private, public, _ = generate(capsys, tmp_path, "k")
    card = write_card(tmp_path, card_v1("https://agent.example"))
    oct_key = tmp_path / "oct.jwk"
    oct_key.write_text(JWK.generate(kty="oct", size=256).export())
    not_json = tmp_path / "not.json"
    not_json.write_text("{nope")
    bad_jwk = tmp_path / "bad.jwk"
    bad_jwk.write_text('{"kty": "EC", "crv": "P-256", "x": "!!", "y": "??"}')
    array = tmp_path / "array.json"
    array.write_text("[1, 2]")
    cases = {
        "public only": ((card, public), "holds a public key only"),
        "oct key": ((card, oct_key), "symmetric (oct) key"),
        "missing key": ((card, tmp_path / "none.jwk"), "cannot read key file"),
        "key not JSON": ((card, not_json), "is not JSON"),
        "key not a JWK": ((card, bad_jwk), "is not a valid JWK"),
        "missing card": ((tmp_path / "none.json", private), "cannot read card file"),
        "card not JSON": ((not_json, private), "card file"),
        "card not an object": ((array, private), "is not a JSON object"),
    }
    for name, ((card_path, key_path), expected) in cases.items():
        status, out, err = cli(capsys, "card", "sign", card_path, "--key", key_path)
        assert status == 2 and out == "", name
        assert expected in one_error_line(err), f"{name}: {err}"
        assert "Traceback" not in err

    status, _, err = cli(capsys, "card", "verify", card, "--jwks", not_json)
    assert status == 2 and "is not JSON" in one_error_line(err)
    status, _, err = cli(capsys, "card", "verify", card, "--jwks", array)
    assert status == 2 and "not a valid JWK" in one_error_line(err)


async def test_verify_follows_the_cards_own_jku(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, card_server: CardServer
) -> None:
    private, public, kid = generate(capsys, tmp_path, "k")
    jku = card_server.url("/.well-known/jwks.json")
    card_server.set("/.well-known/jwks.json", json.loads(public.read_text()))
    signed = sign(
        capsys, write_card(tmp_path, card_v1("https://agent.example")), private, "--jku", jku
    )
    path = write_card(tmp_path, signed, "signed.json")

    status, out, err = await cli_thread(capsys, "card", "verify", path)
    assert (status, out) == (3, f"intact (self-asserted key from {jku}): kid={kid} form=rfc8785\n")
    assert err == f"using the card's own jku {jku}: this checks integrity, not trust\n"
    assert card_server.hits("/.well-known/jwks.json") == 1

    status, out, _ = await cli_thread(capsys, "card", "verify", path, "--json")
    assert status == 3
    shown = json.loads(out)
    assert (shown["status"], shown["kid"], shown["key_source"]) == ("intact", kid, jku)

    # trusted keys, and only they, make it "verified"
    status, out, err = await cli_thread(capsys, "card", "verify", path, "--jwks", public)
    assert (status, out, err) == (0, f"verified: kid={kid} form=rfc8785\n", "")

    # --jwks wins over the jku, and can be a URL too
    card_server.set("/other.json", {"keys": []})
    status, out, err = await cli_thread(
        capsys, "card", "verify", path, "--jwks", card_server.url("/other.json")
    )
    assert status == 1 and out.startswith("untrusted-key: ") and err == ""
    assert card_server.hits("/.well-known/jwks.json") == 2  # the two runs without --jwks

    # the key the jku names is not the signer's: the signature does not match
    _, other_public, _ = generate(capsys, tmp_path, "other")
    other = json.loads(other_public.read_text())
    other["keys"][0]["kid"] = kid
    card_server.set("/.well-known/jwks.json", other)
    status, out, _ = await cli_thread(capsys, "card", "verify", path)
    assert status == 1 and out.startswith("invalid: the signature does not match")


async def test_jku_fetch_failures_are_untrusted(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, card_server: CardServer
) -> None:
    private, _, _ = generate(capsys, tmp_path, "k")
    card = write_card(tmp_path, card_v1("https://agent.example"))
    card_server.set("/html", "<html>keys</html>", Content_Type="text/html")
    card_server.set("/huge", b'{"keys": [], "pad": "' + b"x" * (1024 * 1024) + b'"}')
    cases = {
        "/html": "the answer is not JSON",
        "/huge": "larger than 1048576 bytes",
        "/missing": "HTTP 404 Not Found",
    }
    for route, reason in cases.items():
        jku = card_server.url(route)
        signed = write_card(tmp_path, sign(capsys, card, private, "--jku", jku), "s.json")
        status, out, _ = await cli_thread(capsys, "card", "verify", signed)
        assert status == 1
        assert out == f"untrusted-key: cannot fetch the jku {jku}: {reason}\n", route

    # no jku and no --jwks: nothing to verify with
    signed = write_card(tmp_path, sign(capsys, card, private), "s.json")
    status, out, _ = await cli_thread(capsys, "card", "verify", signed)
    assert (status, out) == (
        1,
        "untrusted-key: the signature names no jku; give the signer's keys with --jwks\n",
    )
    # an unreachable --jwks URL is a one-line error
    status, _, err = await cli_thread(
        capsys, "card", "verify", signed, "--jwks", card_server.url("/missing")
    )
    assert status == 1 and "cannot fetch --jwks" in one_error_line(err)


async def test_self_signed_card_does_not_pass_verify(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, card_server: CardServer
) -> None:
    """Finding: ``card verify x && deploy`` took an attacker's card signed with a key the
    attacker published at the card's own jku for ``verified``, exit 0."""
    _, owner_public, _ = generate(capsys, tmp_path, "owner")
    attacker_private, attacker_public, attacker_kid = generate(capsys, tmp_path, "attacker")
    jku = card_server.url("/attacker/jwks.json")
    card_server.set("/attacker/jwks.json", json.loads(attacker_public.read_text()))
    forged = sign(
        capsys,
        write_card(tmp_path, card_v1("https://attacker.example", name="Weather Agent")),
        attacker_private,
        "--jku",
        jku,
    )
    path = write_card(tmp_path, forged, "forged.json")

    status, out, _ = await cli_thread(capsys, "card", "verify", path)
    assert status == 3 != 0
    assert out.startswith(f"intact (self-asserted key from {jku}): kid={attacker_kid} ")
    assert "verified" not in out
    status, out, _ = await cli_thread(capsys, "card", "verify", path, "--jwks", owner_public)
    assert status == 1 and out.startswith("untrusted-key: ")


def test_verify_help_documents_the_exit_statuses(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["card", "verify", "--help"])
    out = capsys.readouterr().out
    assert "exit status:" in out
    for line in ("  0  verified:", "  1  unsigned,", "  2  bad usage", "  3  intact:"):
        assert line in out


async def test_jku_redirects_stay_on_the_origin(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    card_server: CardServer,
    aiohttp_server: Any,
) -> None:
    private, public, kid = generate(capsys, tmp_path, "k")
    keys = json.loads(public.read_text())
    elsewhere = web.Application()

    async def serve_keys(request: web.Request) -> web.Response:
        return web.json_response(keys)

    elsewhere.router.add_get("/jwks.json", serve_keys)
    other = await aiohttp_server(elsewhere)  # another port: another origin
    card_server.set("/away", {}, status=302, Location=str(other.make_url("/jwks.json")))
    card_server.set("/moved", {}, status=301, Location="/v2/jwks.json")
    card_server.set("/v2/jwks.json", keys)
    card = write_card(tmp_path, card_v1("https://agent.example"))

    away = card_server.url("/away")
    signed = write_card(tmp_path, sign(capsys, card, private, "--jku", away), "s.json")
    status, out, _ = await cli_thread(capsys, "card", "verify", signed)
    assert (status, out) == (
        1,
        f"untrusted-key: cannot fetch the jku {away}: redirected to "
        f"{other.make_url('/jwks.json')}, another origin (refused)\n",
    )
    status, _, err = await cli_thread(capsys, "card", "verify", signed, "--jwks", away)
    assert status == 1 and "another origin (refused)" in one_error_line(err)

    moved = card_server.url("/moved")
    signed = write_card(tmp_path, sign(capsys, card, private, "--jku", moved), "s.json")
    status, out, _ = await cli_thread(capsys, "card", "verify", signed)
    assert status == 3
    assert out == (
        f"intact (self-asserted key from {moved} -> {card_server.url('/v2/jwks.json')}): "
        f"kid={kid} form=rfc8785\n"
    )


async def test_fetch_has_an_overall_deadline(aiohttp_server: Any) -> None:
    """Finding: a server sending one byte at a time kept ``read(64 KiB)`` waiting past
    FETCH_TIMEOUT. Each byte is sent when the client looks at its clock (a tick), and the
    clock moves 1 s per look: the answer never ends, the deadline does."""
    tick, done = asyncio.Event(), asyncio.Event()
    sent = [0]

    async def trickle(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        while not done.is_set():
            await response.write(b" ")
            sent[0] += 1
            await tick.wait()
            tick.clear()
        return response

    app = web.Application()
    app.router.add_get("/jwks.json", trickle)
    server = await aiohttp_server(app)
    now = [0.0]

    def clock() -> float:
        now[0] += 1.0
        tick.set()
        return now[0]

    try:
        with pytest.raises(FetchError, match=r"^took longer than 10 s$"):
            await fetch_json(str(server.make_url("/jwks.json")), time_limit=10.0, clock=clock)
    finally:
        done.set()
        tick.set()
    assert sent[0] <= 12  # one byte per look at the clock: cut off after 10 (fake) seconds


async def test_fetch_deadline_holds_in_real_time(aiohttp_server: Any) -> None:
    """Headers sent, then silence: the real time limit ends the fetch (with the real clock)."""
    gate = asyncio.Event()

    async def stall(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        await response.write(b"{")
        await gate.wait()
        return response

    app = web.Application()
    app.router.add_get("/jwks.json", stall)
    server = await aiohttp_server(app)
    try:
        with pytest.raises(FetchError, match=r"^took longer than 0.2 s$"):
            await fetch_json(str(server.make_url("/jwks.json")), time_limit=0.2)
    finally:
        gate.set()


def test_keys_add_sends_only_public_keys(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """What ``keys add --jwk`` posts (the command itself needs a server: see test_cli.py)."""
    private, public, kid = generate(capsys, tmp_path, "k", alg="RS256")
    (sent,) = public_keys(private)
    assert sent == json.loads(public.read_text())["keys"][0]
    assert sent["kid"] == kid and "d" not in sent and "p" not in sent
    assert not JWK(**sent).has_private
    assert public_keys(public) == [sent]

    # the key's lifetime goes along (the server checks it and honours exp)
    dated = tmp_path / "dated.jwk"
    dated.write_text(json.dumps({**json.loads(private.read_text()), "exp": 4e9, "nbf": 1}))
    (sent,) = public_keys(dated)
    assert (sent["exp"], sent["nbf"]) == (4e9, 1) and "d" not in sent


# --- card fetch ------------------------------------------------------------------------------


async def test_card_fetch_by_base_url_and_card_url(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, demo: DemoAgents
) -> None:
    """A demo agent's card, found by well-known discovery or named, printed or written."""
    for name in ("currency", "translate"):
        url = demo.urls[name]
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"{url}/.well-known/agent-card.json") as resp,
        ):
            served = await resp.json()
        status, out, err = await cli_thread(capsys, "card", "fetch", url)
        assert (status, err) == (0, "") and json.loads(out) == served, name
    card_url = f"{demo.urls['caption']}/.well-known/agent-card.json"
    target = tmp_path / "agent-card.json"
    status, out, err = await cli_thread(capsys, "card", "fetch", card_url, "-o", target)
    assert (status, out) == (0, "")
    assert err == f"card of {card_url} written to {target}\n"
    assert json.loads(target.read_text(encoding="utf-8"))["name"] == "Image captioner"


async def test_card_fetch_tries_the_legacy_path_and_fails_in_one_line(
    capsys: pytest.CaptureFixture[str], aiohttp_server: Any
) -> None:
    card = card_v1("http://agent.example")

    async def legacy_card(_: web.Request) -> web.Response:
        return web.json_response(card)

    legacy = web.Application()
    legacy.router.add_get("/.well-known/agent.json", legacy_card)
    server = await aiohttp_server(legacy)
    url = str(server.make_url("")).rstrip("/")
    status, out, err = await cli_thread(capsys, "card", "fetch", url)
    assert (status, err) == (0, "") and json.loads(out) == card

    empty = await aiohttp_server(web.Application())
    url = str(empty.make_url("")).rstrip("/")
    status, out, err = await cli_thread(capsys, "card", "fetch", url)
    line = one_error_line(err)
    assert status == 1 and out == ""
    assert line.startswith(f"switchboard: no agent card found for {url} (")
    assert "agent-card.json: HTTP 404 Not Found" in line and "agent.json: HTTP 404" in line

    status, _, err = await cli_thread(capsys, "card", "fetch", "agent.example.com")
    assert status == 2 and "not an http(s) URL" in one_error_line(err)
