"""The Authenticator: which credentials prove whom, in which client-auth modes."""

from __future__ import annotations

import pytest

from registry.access.authenticate import Authenticator
from registry.access.errors import AuthError
from registry.access.principal import Principal
from tests.support.helpers import make_settings

ALICE = Principal("alice", tenant="acme", method="api-key", key_id="k1")
CAROL = Principal("carol", method="jwt")


class Keys:
    """API keys: one known key."""

    async def authenticate(self, key: str) -> Principal:
        if key != "sbk_k1_secret":
            raise AuthError("unknown_key", "unknown API key")
        return ALICE


class Tokens:
    """JWTs: one known token."""

    async def verify(self, token: str) -> Principal:
        if token != "a.b.c":
            raise AuthError("bad_signature", "the token's signature does not verify")
        return CAROL


def _auth(mode: str, **settings: object) -> Authenticator:
    extra = {"jwt_issuer": "https://idp.example"} if "jwt" in mode else {}
    values = make_settings("sqlite://", client_auth=mode, admin_token="adm", **extra, **settings)
    return Authenticator(values, keys=Keys(), tokens=Tokens())


async def test_each_credential_proves_its_principal() -> None:
    auth = _auth("api-key,jwt", read_token="rdr")
    assert auth.client_auth
    assert await auth.authenticate({}) is None
    admin = await auth.authenticate({"Authorization": "Bearer adm"})
    assert admin is not None and admin.is_admin
    reader = await auth.authenticate({"Authorization": "Bearer rdr"})
    assert reader is not None and reader.is_reader and not reader.is_admin
    assert await auth.authenticate({"X-API-Key": "sbk_k1_secret"}) == ALICE
    assert await auth.authenticate({"Authorization": "Bearer sbk_k1_secret"}) == ALICE
    assert await auth.authenticate({"Authorization": "bearer a.b.c"}) == CAROL


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ({"Authorization": "Basic dXNlcjpwYXNz"}, "malformed"),
        ({"Authorization": "Bearer "}, "malformed"),
        ({"Authorization": "Bearer " + "x" * 20000}, "malformed"),
        ({"Authorization": "Bearer sbk_k1_wrong"}, "unknown_key"),
        ({"X-API-Key": "sbk_k1_wrong"}, "unknown_key"),
        ({"Authorization": "Bearer a.b.d"}, "bad_signature"),
        ({"Authorization": "Bearer opaque"}, "unknown_credential"),
    ],
)
async def test_bad_credentials_are_errors(headers: dict[str, str], reason: str) -> None:
    with pytest.raises(AuthError) as caught:
        await _auth("api-key,jwt").authenticate(headers)
    assert caught.value.reason == reason
    assert "secret" not in caught.value.message and "wrong" not in caught.value.message


async def test_modes_that_are_off_accept_none_of_their_credentials() -> None:
    keys_only = _auth("api-key")
    assert keys_only.tokens is None and "ApiKey" in keys_only.challenge()
    with pytest.raises(AuthError):
        await keys_only.authenticate({"Authorization": "Bearer a.b.c"})
    jwt_only = _auth("jwt")
    assert jwt_only.keys is None and "ApiKey" not in jwt_only.challenge()
    with pytest.raises(AuthError):
        await jwt_only.authenticate({"X-API-Key": "sbk_k1_secret"})
    off = _auth("none")
    assert not off.client_auth
    assert (await off.authenticate({"Authorization": "Bearer adm"})) is not None
