"""Switchboard settings: every option comes from a ``switchboard serve`` flag, a
``SWITCHBOARD_*`` environment variable or the config file ``SWITCHBOARD_CONFIG`` names (a TOML
file, or a ``.env`` file), in that order of precedence.

``docs/configuration.md`` documents each field; a test keeps the two in step.
"""

from __future__ import annotations

import difflib
import io
import ipaddress
import os
import tomllib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Annotated, Literal

from dotenv.parser import parse_stream
from pydantic import Field, ValidationInfo, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    DotEnvSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from registry.egress import check_no_proxy, check_proxy_url
from registry.health import RefreshPolicy

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
CONFIG_VARIABLE = "SWITCHBOARD_CONFIG"
PREFIX = "SWITCHBOARD_"
CLIENT_AUTH_MODES = ("api-key", "jwt")
"""The modes ``SWITCHBOARD_CLIENT_AUTH`` may combine (``none``: no client authentication)."""
JWT_ALGORITHMS = (
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA",
)  # fmt: skip
"""The asymmetric JWS algorithms a client's JWT may use (never ``none`` or HMAC)."""


class ConfigFileError(ValueError):
    """The file ``SWITCHBOARD_CONFIG`` names cannot be used: missing or unreadable, not valid
    TOML or ``.env`` syntax, or a key that is no setting. The message is one line."""


def default_data_dir() -> str:
    """Where downloaded models live by default: ``$XDG_DATA_HOME/switchboard``, else
    ``~/.local/share/switchboard``."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return str(Path(base) / "switchboard")


LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR"]
"""The levels ``serve`` logs at (``SWITCHBOARD_LOG_LEVEL``, ``--log-level``)."""


class Settings(BaseSettings):
    """All runtime configuration of one Switchboard process."""

    model_config = SettingsConfigDict(env_prefix=PREFIX, extra="ignore")

    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)
    grpc_port: int | None = Field(None, ge=0, le=65535)  # the gRPC binding: off by default
    workers: int | None = Field(None, ge=1, le=256)  # serve processes; None: the CPUs available
    database_url: str = "sqlite:///./switchboard.db"
    admin_token: str | None = None
    read_token: str | None = None
    client_auth: str = "none"
    jwt_issuer: str | None = None
    jwt_audience: str | None = None
    jwt_jwks_url: str | None = None
    jwt_subject_claim: str = "sub"
    jwt_tenant_claim: str = "tenant"
    jwt_groups_claim: str = "groups"
    jwt_roles_claim: str = "roles"
    jwt_algorithms: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: list(JWT_ALGORITHMS)
    )
    jwt_leeway: float = Field(60.0, ge=0, le=600)
    task_scope: Literal["subject", "tenant"] = "subject"
    agent_access: Literal["allow", "deny"] = "allow"
    rate_limit_rps: float | None = Field(None, gt=0)
    rate_limit_burst: int | None = Field(None, gt=0)
    rate_limit_streams: int | None = Field(None, gt=0)
    # failed authentications per second per client address (registry.access.throttle); 0: off
    rate_limit_auth_failures: float = Field(5.0, ge=0)
    # proxies whose X-Forwarded-For names the client (registry.access.clientaddr)
    trusted_proxies: Annotated[list[Network], NoDecode] = Field(default_factory=list)
    # seconds an idle keep-alive connection stays open (announced as Keep-Alive: timeout=N);
    # above clients' and load balancers' own idle timeouts, so that they close first
    keepalive_timeout: int = Field(3630, ge=1, le=86400)
    secret_key: str | None = None
    secret_key_file: str | None = None
    seeds: Annotated[list[str], NoDecode] = Field(default_factory=list)

    # crawler limits
    allow_networks: Annotated[list[Network], NoDecode] = Field(default_factory=list)
    max_card_bytes: int = Field(1024 * 1024, gt=0)
    max_json_depth: int = Field(32, gt=0, le=256)
    max_redirects: int = Field(3, ge=0, le=10)
    connect_timeout: float = Field(5.0, gt=0)
    read_timeout: float = Field(10.0, gt=0)

    # API
    page_size: int = Field(50, gt=0)
    max_page_size: int = Field(500, gt=0)
    max_request_bytes: int = Field(2 * 1024 * 1024, gt=0)

    # signed cards
    trusted_jku: Annotated[list[str], NoDecode] = Field(default_factory=list)
    require_signed_cards: bool = False
    signing_key_file: str | None = None

    # router
    public_url: str | None = None
    router_name: str = "Switchboard"
    router_description: str = "Routes each A2A message to the registered agent whose skill fits."
    # the threshold of the matcher in use (router/choose): the fused score on [0, 1] with
    # the semantic one (over SWITCHBOARD_REFUSE's), the BM25 score with the lexical (0.5)
    match_threshold: float | None = Field(None, ge=0)
    # the operating point of matching by meaning: refuse below the calibrated threshold,
    # a stricter one, or never (the default route, else the best candidate as tier guess)
    refuse: Literal["calibrated", "strict", "never"] = "calibrated"
    default_agent: str | None = None
    default_skill: str | None = None
    upstream_connect_timeout: float = Field(5.0, gt=0)
    upstream_timeout: float = Field(120.0, gt=0)
    max_streams: int = Field(1000, gt=0)
    upstream_max_connections: int = Field(1000, gt=0)
    upstream_max_connections_per_agent: int = Field(100, gt=0)
    # JSON-RPC calls and streams: "lean" (router/forward/h1client.py) or "aiohttp" (its client)
    upstream_client: Literal["lean", "aiohttp"] = "lean"
    sse_keepalive: float = Field(15.0, gt=0)

    # every outbound request through the operator's proxy (registry.egress); never HTTP_PROXY
    outbound_proxy: str | None = None
    outbound_no_proxy: Annotated[list[str], NoDecode] = Field(default_factory=list)

    # observability (see docs/observability.md)
    metrics: bool = True  # GET /metrics (SWITCHBOARD_METRICS=off: none)
    metrics_port: int | None = Field(None, ge=0, le=65535)  # /metrics there, not on `port`
    log_format: Literal["text", "json"] = "text"
    log_level: LogLevel = "INFO"  # `serve --log-level` over it

    # the web console at /ui/ (router/ui/, docs/console.md); off: no /ui/, no redirect from /
    ui: bool = True

    # push notifications relayed to clients' webhooks (see router.push, docs/push.md)
    push_allow_networks: Annotated[list[Network], NoDecode] = Field(default_factory=list)
    push_receiver_url: str | None = None
    push_max_attempts: int = Field(8, ge=1, le=100)
    push_retry_base: float = Field(1.0, gt=0)
    push_retry_cap: float = Field(300.0, gt=0)
    push_timeout: float = Field(10.0, gt=0)
    push_poll_interval: float = Field(1.0, gt=0)
    push_poll_cap: float = Field(30.0, gt=0)
    shutdown_grace: float = Field(8.0, gt=0)
    gc_threshold: int = Field(700, ge=100, le=1_000_000)  # youngest generation (serve)

    # choosing the agent by meaning (see router.choose.semantic, docs/routing.md)
    matcher: Literal["semantic", "lexical"] = "semantic"
    data_dir: str = Field(default_factory=default_data_dir)
    embedding_model: str | None = None
    embedding_max_tokens: int = Field(128, ge=8, le=512)
    # threads embedding messages at once, a batch each; None: this worker's share of the CPUs
    embedding_threads: int | None = Field(None, ge=1, le=64)
    embeddings_url: str | None = None
    embeddings_model: str | None = None
    embeddings_api_key: str | None = None
    model_fetch: bool = False
    # new skill texts are embedded once a burst of catalog changes ends (registry.indexing)
    index_quiet: float = Field(0.2, ge=0, le=60)
    index_max_delay: float = Field(30.0, gt=0, le=600)
    router_llm_url: str | None = None
    router_llm_model: str | None = None
    router_llm_api_key: str | None = None
    router_llm_timeout: float = Field(2.0, gt=0)

    # replicas: how often each process checks the database for other processes' changes (the
    # fallback: workers of one serve and replicas on PostgreSQL are told at once)
    catalog_sync_interval: float = Field(2.0, gt=0)
    # seconds an admin write waits for every worker of its serve to apply it before answering
    write_ack_timeout: float = Field(1.0, gt=0, le=60)

    # scheduled refresh and health (see registry.health, registry.refresh)
    refresh: bool = True
    refresh_interval: float = Field(300.0, gt=0)
    health_interval: float = Field(60.0, gt=0)
    refresh_min_interval: float = Field(30.0, gt=0)
    refresh_max_interval: float = Field(86400.0, gt=0)
    refresh_jitter: float = Field(0.1, ge=0, le=0.5)
    refresh_concurrency: int = Field(8, gt=0, le=256)
    refresh_tick: float = Field(1.0, gt=0)
    refresh_lease_ttl: float = Field(30.0, gt=0)
    health_retry_base: float = Field(5.0, gt=0)
    health_retry_max: float = Field(600.0, gt=0)
    health_unreachable_after: int = Field(3, ge=1)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Flags (init arguments) win over the environment, which wins over the config file."""
        config = config_file_source(settings_cls)
        return (init_settings, env_settings, *([config] if config else []))

    @model_validator(mode="after")
    def _page_sizes(self) -> Settings:
        if self.page_size > self.max_page_size:
            raise ValueError(
                f"page_size ({self.page_size}) must not exceed max_page_size ({self.max_page_size})"
            )
        if self.refresh_min_interval > self.refresh_max_interval:
            raise ValueError(
                f"refresh_min_interval ({self.refresh_min_interval}) must not exceed "
                f"refresh_max_interval ({self.refresh_max_interval})"
            )
        if self.health_retry_base > self.health_retry_max:
            raise ValueError(
                f"health_retry_base ({self.health_retry_base}) must not exceed "
                f"health_retry_max ({self.health_retry_max})"
            )
        if "jwt" in self.client_auth_modes() and not self.jwt_issuer:
            raise ValueError(
                "client_auth jwt needs jwt_issuer (SWITCHBOARD_JWT_ISSUER): the issuer whose "
                "tokens are accepted (its JWKS comes from SWITCHBOARD_JWT_JWKS_URL or OIDC "
                "discovery)"
            )
        if self.secret_key and self.secret_key_file:
            raise ValueError("set secret_key or secret_key_file, not both")
        return self

    def refresh_policy(self) -> RefreshPolicy:
        """The refresh schedule and health rules these settings describe."""
        return RefreshPolicy(
            interval=self.refresh_interval,
            health_interval=self.health_interval,
            min_interval=self.refresh_min_interval,
            max_interval=self.refresh_max_interval,
            jitter=self.refresh_jitter,
            retry_base=self.health_retry_base,
            retry_max=self.health_retry_max,
            unreachable_after=self.health_unreachable_after,
        )

    @field_validator("log_level", mode="before")
    @classmethod
    def _log_level(cls, value: object) -> object:
        """A level's name in any case."""
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("client_auth", mode="before")
    @classmethod
    def _client_auth(cls, value: object) -> object:
        """``none``, or ``api-key``, ``jwt`` or both (comma-separated, any order)."""
        if not isinstance(value, str):
            return value
        modes = [part.strip().lower() for part in value.split(",") if part.strip()]
        if modes in ([], ["none"]):
            return "none"
        unknown = [m for m in modes if m not in CLIENT_AUTH_MODES]
        if unknown:
            raise ValueError(
                f"unknown client auth mode {unknown[0]!r}: use none, api-key, jwt or api-key,jwt"
            )
        return ",".join(m for m in CLIENT_AUTH_MODES if m in modes)

    @field_validator("jwt_algorithms", mode="after")
    @classmethod
    def _jwt_algorithms(cls, value: list[str]) -> list[str]:
        """Only asymmetric algorithms: a JWT signed with ``none`` or an HMAC key is refused."""
        bad = [alg for alg in value if alg not in JWT_ALGORITHMS]
        if bad or not value:
            raise ValueError(
                f"JWT algorithm {bad[0]!r} is not allowed; choose among {', '.join(JWT_ALGORITHMS)}"
                if bad
                else "at least one JWT algorithm is needed"
            )
        return value

    @field_validator("outbound_proxy", mode="after")
    @classmethod
    def _outbound_proxy(cls, value: str | None) -> str | None:
        """An http(s) proxy URL (its credentials never in the message); empty: none."""
        return check_proxy_url(value) if value and value.strip() else None

    @field_validator("outbound_no_proxy", mode="after")
    @classmethod
    def _outbound_no_proxy(cls, value: list[str]) -> list[str]:
        """Hosts, domains, addresses and networks, as ``NO_PROXY`` lists them."""
        return check_no_proxy(value)

    def client_auth_modes(self) -> frozenset[str]:
        """The client authentication modes on (empty: ``none``)."""
        return frozenset() if self.client_auth == "none" else frozenset(self.client_auth.split(","))

    @field_validator(
        "allow_networks",
        "push_allow_networks",
        "trusted_jku",
        "seeds",
        "jwt_algorithms",
        "outbound_no_proxy",
        "trusted_proxies",
        mode="before",
    )
    @classmethod
    def _split_commas(cls, value: object, info: ValidationInfo) -> object:
        """Lists come from the environment as comma-separated text; networks may have host
        bits set (``10.0.0.1/8`` means ``10.0.0.0/8``)."""
        if isinstance(value, str):
            value = [part.strip() for part in value.split(",") if part.strip()]
        networks = ("allow_networks", "push_allow_networks", "trusted_proxies")
        if info.field_name in networks and isinstance(value, list):
            return [ipaddress.ip_network(item, strict=False) for item in value]
        return value


def config_file_source(settings_cls: type[BaseSettings]) -> PydanticBaseSettingsSource | None:
    """The settings source of the file ``SWITCHBOARD_CONFIG`` names, checked first; None when
    the variable is unset. A name ending in ``.toml`` is TOML with the settings' field names as
    keys (``port = 9000``); any other is a ``.env`` file of ``SWITCHBOARD_*`` variables.
    ConfigFileError for a file that cannot be read, bad syntax or an unknown key."""
    name = os.environ.get(CONFIG_VARIABLE)
    if not name:
        return None
    path = Path(name).expanduser()
    where = f"config file {name} ({CONFIG_VARIABLE})"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigFileError(f"cannot read {where}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigFileError(f"cannot read {where}: it is not UTF-8 text") from None
    fields = set(settings_cls.model_fields)
    if path.suffix.lower() == ".toml":
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigFileError(f"{where} is not valid TOML: {exc}") from None
        _check_keys(where, data, fields, str)
        return TomlConfigSettingsSource(settings_cls, toml_file=path)
    keys = []
    for binding in parse_stream(io.StringIO(text)):
        if binding.error:
            blank = len(binding.original.string) - len(binding.original.string.lstrip("\n"))
            raise ConfigFileError(
                f"{where}: line {binding.original.line + blank}: expected NAME=value "
                "(a .env file; a TOML file's name must end in .toml)"
            )
        if binding.key is not None:
            keys.append(binding.key)
    _check_keys(where, keys, {f"{PREFIX}{f}".upper() for f in fields}, str.upper)
    return DotEnvSettingsSource(settings_cls, env_file=path, env_file_encoding="utf-8")


def _check_keys(
    where: str, keys: Iterable[str], known: set[str], canonical: Callable[[str], str]
) -> None:
    """ConfigFileError naming the first of ``keys`` whose ``canonical`` form is not ``known``,
    with the closest known key (``SWITCHBOARD_PORT`` in a TOML file: ``port``)."""
    lowered = {k.lower(): k for k in known}
    for key in keys:
        if canonical(key) in known:
            continue
        bare = key.lower().removeprefix(PREFIX.lower())
        guesses = [
            lowered[match]
            for candidate in (bare, PREFIX.lower() + bare)
            for match in difflib.get_close_matches(candidate, lowered, n=1)
        ]
        hint = f": did you mean {guesses[0]!r}?" if guesses else ""
        raise ConfigFileError(
            f"unknown setting {key!r} in {where}{hint} (see docs/configuration.md)"
        )
