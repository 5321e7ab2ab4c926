"""Outbound credentials: what the router sends to an agent that wants its callers to
authenticate.

Per agent, one of: a static header (an API key, a bearer token), OAuth2 client credentials
(token URL, client id, client secret, scopes: the router fetches and caches the access
token), or pass-through of the client's own ``Authorization`` (``forward_client_auth``). The
secret (header value or client secret) is encrypted with :class:`~registry.access.secrets.
SecretBox` in the ``agent_credentials`` table and never shown: not in the API's views, not in
``repr``, not in logs.

:class:`AgentCredentials` keeps every credential in memory (decrypted at load), over the
table; ``credentials_version`` in ``catalog_state`` tells other replicas to reload
(:meth:`AgentCredentials.sync`). A credential is bound to the registration of its agent
(its ``created_at``): removing the agent removes it, and an agent registered again under the
same id starts without one.
"""

from __future__ import annotations

import hmac
import logging
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, delete, select
from yarl import URL

from registry.access.secrets import KEY_SETTINGS, SecretBox, SecretError
from registry.errors import NotFound, RegistryError, agent_not_found
from registry.records import as_utc, iso, utcnow
from registry.store import Store, bump
from registry.synced import Synced
from registry.tables import AgentCredentialRow, AgentRow, CatalogStateRow

__all__ = [
    "VERSION_KEY",
    "AgentCredentials",
    "Credential",
    "CredentialError",
    "CredentialSpec",
    "Kind",
    "Secret",
    "check_url",
    "no_credential",
    "parse_credential",
]

log = logging.getLogger(__name__)

VERSION_KEY = "credentials_version"
Kind = Literal["header", "oauth2", "forward"]
"""``header``: a static header; ``oauth2``: client credentials; ``forward``: only the
client's own ``Authorization`` passes (no secret stored)."""

MAX_SECRET = 8192
MAX_URL = 2048
MAX_SCOPES = 64
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # RFC 9110 token (header names, schemes)
_SCOPE = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")  # RFC 6749 scope-token
_PRINTABLE = re.compile(r"[\x20-\x7e]*")
# headers the router sets itself on every call to an agent: a credential cannot name them
_RESERVED = frozenset(
    {
        "host",
        "content-length",
        "content-type",
        "content-encoding",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "te",
        "trailer",
        "upgrade",
        "proxy-connection",
        "accept",
        "a2a-version",
        "a2a-extensions",
        "x-a2a-extensions",
        "user-agent",
    }
)
_FIELDS: dict[str, frozenset[str]] = {
    "header": frozenset({"kind", "header", "scheme", "value", "forward_client_auth"}),
    "oauth2": frozenset(
        {
            "kind",
            "token_url",
            "client_id",
            "client_secret",
            "scopes",
            "audience",
            "forward_client_auth",
        }
    ),
    "forward": frozenset({"kind", "forward_client_auth"}),
}


class CredentialError(RegistryError):
    """A credential body that cannot be used: ``details`` names the field."""

    status = 400
    code = "invalid_credential"


class Secret:
    """A secret string that does not show itself: ``repr`` and ``str`` are ``***``;
    :meth:`reveal` gives the value."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The secret itself (to put on the wire, nowhere else)."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Secret):
            return NotImplemented
        return hmac.compare_digest(self._value.encode(), other._value.encode())

    def __hash__(self) -> int:
        return hash(Secret)


@dataclass(frozen=True)
class CredentialSpec:
    """A credential as an operator gives it (validated by :func:`parse_credential`)."""

    kind: Kind
    header_name: str = "Authorization"
    header_scheme: str = ""
    token_url: str | None = None
    client_id: str | None = None
    scopes: tuple[str, ...] = ()
    audience: str | None = None
    forward_client_auth: bool = False
    secret: Secret | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Credential:
    """An agent's stored credential. ``secret`` is None when there is none (``forward``) or
    it cannot be decrypted; then ``problem`` says why (for ``header`` and ``oauth2``)."""

    agent_id: str
    kind: Kind
    header_name: str
    header_scheme: str
    token_url: str | None
    client_id: str | None
    scopes: tuple[str, ...]
    audience: str | None
    forward_client_auth: bool
    updated_at: datetime
    updated_by: str
    agent_created_at: datetime | None = None
    secret: Secret | None = field(default=None, repr=False)
    has_secret: bool = False
    problem: str | None = None

    def usable_secret(self) -> str:
        """The decrypted secret; :class:`SecretError` (naming the key setting) if the stored
        one cannot be decrypted."""
        if self.secret is None:
            raise SecretError(
                self.problem or f"agent {self.agent_id} has no stored secret",
                code="undecryptable_secret",
            )
        return self.secret.reveal()

    def header(self) -> tuple[str, str]:
        """The static header of a ``header`` credential: (name, value)."""
        value = self.usable_secret()
        return self.header_name, f"{self.header_scheme} {value}" if self.header_scheme else value

    def to_api(self) -> dict[str, Any]:
        """The admin API view: everything but the secret."""
        return {
            "agent_id": self.agent_id,
            "kind": self.kind,
            "header": self.header_name if self.kind == "header" else None,
            "scheme": self.header_scheme if self.kind == "header" else None,
            "token_url": self.token_url,
            "client_id": self.client_id,
            "scopes": list(self.scopes),
            "audience": self.audience,
            "has_secret": self.has_secret,
            "forward_client_auth": self.forward_client_auth,
            "problem": self.problem,
            "updated_at": iso(self.updated_at),
            "updated_by": self.updated_by,
        }


# --- reading a body --------------------------------------------------------------------------


def parse_credential(body: Any) -> CredentialSpec:
    """The credential of a ``PUT /api/v1/agents/{id}/credentials`` body; CredentialError
    (400, naming the field) if it is not one. Messages never repeat a secret."""
    if not isinstance(body, dict):
        raise CredentialError("the request body must be a JSON object", code="invalid_body")
    forward = body.get("forward_client_auth", False)
    if not isinstance(forward, bool):
        raise _bad("forward_client_auth", "must be true or false")
    kind = body.get("kind", "forward" if forward else None)
    if kind is None:
        raise _bad("kind", 'is required: "header" (a static header) or "oauth2"')
    if kind not in _FIELDS:
        raise _bad("kind", 'must be "header", "oauth2" or "forward"')
    unknown = sorted(set(body) - _FIELDS[kind])
    if unknown:
        raise CredentialError(
            f"unknown field(s) for a {kind} credential: {', '.join(unknown)}",
            details={"unknown": unknown, "allowed": sorted(_FIELDS[kind])},
        )
    if kind == "forward":
        if not forward:
            raise _bad("forward_client_auth", 'must be true for kind "forward"')
        return CredentialSpec("forward", forward_client_auth=True)
    if kind == "header":
        return _header_spec(body, forward)
    return _oauth2_spec(body, forward)


def _header_spec(body: dict[str, Any], forward: bool) -> CredentialSpec:
    name = _text(body, "header", required=False, limit=256) or "Authorization"
    if not _TOKEN.fullmatch(name):
        raise _bad("header", "must be a header name (letters, digits and !#$%&'*+.^_`|~-)")
    if name.lower() in _RESERVED:
        raise _bad("header", f"{name} is set by the router itself; use another header")
    default = "Bearer" if name.lower() == "authorization" else ""
    scheme = body.get("scheme", default)
    if not isinstance(scheme, str) or (scheme and not _TOKEN.fullmatch(scheme)):
        raise _bad("scheme", 'must be an authentication scheme such as "Bearer", or ""')
    value = _text(body, "value", limit=MAX_SECRET)
    if value != value.strip():
        raise _bad("value", "must not start or end with spaces")
    if scheme and value.lower().startswith(scheme.lower() + " "):
        raise _bad("value", f'starts with "{scheme} ": give the token alone, the scheme is added')
    return CredentialSpec(
        "header",
        header_name=name,
        header_scheme=scheme,
        forward_client_auth=forward,
        secret=Secret(value),
    )


def _oauth2_spec(body: dict[str, Any], forward: bool) -> CredentialSpec:
    token_url = check_url(_text(body, "token_url", limit=MAX_URL), "token_url")
    client_id = _text(body, "client_id", limit=1024)
    secret = _text(body, "client_secret", limit=MAX_SECRET)
    scopes = body.get("scopes", [])
    if not isinstance(scopes, list) or len(scopes) > MAX_SCOPES:
        raise _bad("scopes", f"must be a list of at most {MAX_SCOPES} scopes")
    for scope in scopes:
        if not isinstance(scope, str) or not _SCOPE.fullmatch(scope) or len(scope) > 256:
            raise _bad("scopes", "each scope is a non-empty string without spaces, quotes or \\")
    audience = _text(body, "audience", required=False, limit=MAX_URL)
    return CredentialSpec(
        "oauth2",
        token_url=token_url,
        client_id=client_id,
        scopes=tuple(dict.fromkeys(scopes)),
        audience=audience,
        forward_client_auth=forward,
        secret=Secret(secret),
    )


def check_url(text: str, name: str = "token_url") -> str:
    """``text`` if it is an absolute http(s) URL with a host, no ``user:password@`` and no
    fragment; CredentialError otherwise (the message never repeats the URL)."""
    try:
        url = URL(text)
        host = url.host
    except (ValueError, TypeError):
        raise _bad(name, "cannot be parsed as a URL") from None
    if url.scheme not in ("http", "https") or not host:
        raise _bad(name, "must be an http or https URL with a host")
    if url.raw_user is not None or url.raw_password is not None:
        raise _bad(name, "must not hold credentials (user:password@); give client_id instead")
    if url.raw_fragment:
        raise _bad(name, "must not have a fragment (#...)")
    return text


def _text(body: dict[str, Any], name: str, *, required: bool = True, limit: int) -> str:
    value = body.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or not value:
        raise _bad(name, "is required: a non-empty string")
    if len(value) > limit:
        raise _bad(name, f"is longer than {limit} characters")
    if not _PRINTABLE.fullmatch(value):
        raise _bad(name, "must be printable ASCII (no CR, LF or other control characters)")
    return value


def no_credential(agent_id: str) -> NotFound:
    """The 404 of an agent without an outbound credential."""
    return NotFound(f"agent {agent_id!r} has no outbound credential", details={"id": agent_id})


def _bad(name: str, problem: str) -> CredentialError:
    return CredentialError(f"{name} {problem}", details={"field": name, "problem": problem})


# --- the store -------------------------------------------------------------------------------


class AgentCredentials(Synced):
    """Every agent's outbound credential in memory, over the ``agent_credentials`` table.

    ``box`` encrypts and decrypts the secrets (set it before :meth:`load`); without one,
    storing a credential with a secret fails (409 naming SWITCHBOARD_SECRET_KEY) and stored
    secrets cannot be used.
    """

    VERSION_KEY = VERSION_KEY

    def __init__(self, store: Store, box: SecretBox | None = None) -> None:
        self.store = store
        self.box = box
        self.version = -1
        self._all: dict[str, Credential] = {}

    def __repr__(self) -> str:
        return f"AgentCredentials(<{len(self._all)} credential(s)>)"

    def get(self, agent_id: str, *, agent_created_at: datetime | None = None) -> Credential | None:
        """The credential of ``agent_id``; with ``agent_created_at`` (the registration the
        caller sees), None when the credential belongs to an earlier one."""
        credential = self._all.get(agent_id)
        if credential is None:
            return None
        bound = credential.agent_created_at
        if agent_created_at is not None and bound is not None and bound != as_utc(agent_created_at):
            return None
        return credential

    def all(self) -> list[Credential]:
        """Every credential, by agent id."""
        return [self._all[key] for key in sorted(self._all)]

    async def load(self) -> None:
        """Create the counter if missing, re-encrypt secrets under an older key with the
        first key (rotation), and read every credential."""
        await self.create_counter()
        await self.reencrypt()
        await self._reload()

    async def reencrypt(self) -> int:
        """Encrypt again with the first key every secret stored under another (key rotation);
        how many were. Each row is written only if still unchanged (compare-and-set)."""
        box = self.box
        if box is None or box.key_count < 2:
            return 0
        async with self.store.session() as session:
            rows = (await session.exec(select(AgentCredentialRow))).all()
        done = 0
        for row in rows:
            if not row.secret or box.is_current(row.secret):
                continue
            try:
                token = box.reencrypt(row.secret)
            except SecretError:
                continue  # reported when loaded
            async with self.store.session() as session, session.begin():
                result = await session.exec(
                    update(AgentCredentialRow)
                    .where(col(AgentCredentialRow.agent_id) == row.agent_id)
                    .where(col(AgentCredentialRow.secret) == row.secret)
                    .values(secret=token)
                )
                done += result.rowcount  # type: ignore[attr-defined]
        if done:
            log.info("%d outbound secret(s) re-encrypted with the first secret key", done)
        return done

    async def put(self, agent_id: str, spec: CredentialSpec, *, by: str) -> Credential:
        """Store ``spec`` as the credential of ``agent_id`` (replacing any), bound to the
        agent's current registration; 404 if there is no such agent, 409 if a secret must be
        stored and there is no key."""
        token = None
        if spec.secret is not None:
            if self.box is None:
                raise SecretError(
                    f"storing a credential needs a key to encrypt it: set {KEY_SETTINGS} "
                    "(`switchboard keys secret` makes one) and restart",
                    code="secret_key_missing",
                )
            token = self.box.encrypt(spec.secret.reveal())
        try:
            async with self.store.session() as session, session.begin():
                agent = await session.get(AgentRow, agent_id)
                if agent is None:
                    raise agent_not_found(agent_id)
                row = await session.get(AgentCredentialRow, agent_id, with_for_update=True)
                if row is None:
                    row = AgentCredentialRow(agent_id=agent_id, kind=spec.kind, updated_at=utcnow())
                row.kind = spec.kind
                row.header_name = spec.header_name
                row.header_scheme = spec.header_scheme
                row.token_url, row.client_id = spec.token_url, spec.client_id
                row.scopes, row.audience = list(spec.scopes), spec.audience
                row.secret, row.forward_client_auth = token, spec.forward_client_auth
                row.agent_created_at = agent.created_at
                row.updated_at, row.updated_by = utcnow(), by[:256]
                session.add(row)
                self.advanced(await bump(session, VERSION_KEY))
        except IntegrityError:  # the agent was removed meanwhile
            raise agent_not_found(agent_id) from None
        credential = self._credential(row, spec.secret)
        self._all[agent_id] = credential
        return credential

    async def delete(self, agent_id: str) -> bool:
        """Delete the credential of ``agent_id``; False if it had none."""
        async with self.store.session() as session, session.begin():
            result = await session.exec(
                delete(AgentCredentialRow).where(col(AgentCredentialRow.agent_id) == agent_id)
            )
            if not result.rowcount:
                self._all.pop(agent_id, None)
                return False
            self.advanced(await bump(session, VERSION_KEY))
        self._all.pop(agent_id, None)
        return True

    def require(self, agent_id: str, agent_created_at: datetime | None = None) -> Credential:
        """:meth:`get`, or 404 ``not_found`` saying the agent has no credential."""
        credential = self.get(agent_id, agent_created_at=agent_created_at)
        if credential is None:
            raise no_credential(agent_id)
        return credential

    async def _reload(self) -> None:
        async with self.store.session() as session:
            state = await session.get(CatalogStateRow, VERSION_KEY)
            rows = (await session.exec(select(AgentCredentialRow))).all()
        loaded = {}
        for row in rows:
            secret, problem = self._open(row)
            if problem is not None:
                log.warning(
                    "the outbound credential of agent %s cannot be used: %s", row.agent_id, problem
                )
            loaded[row.agent_id] = self._credential(row, secret, problem)
        self._all = loaded
        self.version = state.value if state else 0

    def _open(self, row: AgentCredentialRow) -> tuple[Secret | None, str | None]:
        if row.secret is None:
            return None, None
        if self.box is None:
            return None, f"no {KEY_SETTINGS} is set: the stored secret cannot be decrypted"
        try:
            return Secret(self.box.decrypt(row.secret)), None
        except SecretError as exc:
            return None, exc.message

    @staticmethod
    def _credential(
        row: AgentCredentialRow, secret: Secret | None, problem: str | None = None
    ) -> Credential:
        return Credential(
            agent_id=row.agent_id,
            kind=row.kind,  # type: ignore[arg-type]
            header_name=row.header_name,
            header_scheme=row.header_scheme,
            token_url=row.token_url,
            client_id=row.client_id,
            scopes=tuple(row.scopes or ()),
            audience=row.audience,
            forward_client_auth=row.forward_client_auth,
            updated_at=as_utc(row.updated_at),
            updated_by=row.updated_by,
            agent_created_at=as_utc(row.agent_created_at) if row.agent_created_at else None,
            secret=secret,
            has_secret=row.secret is not None,
            problem=problem,
        )
