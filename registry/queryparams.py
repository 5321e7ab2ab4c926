"""The query strings of the admin API's listings, as pydantic models.

One model per listing (:class:`AgentsQuery` for ``GET /api/v1/agents``, :class:`SkillsQuery`
for ``GET /api/v1/skills``) validates the query and describes its parameters in the OpenAPI
document (:mod:`registry.openapi`). :func:`read_query` reads a query string into one; every
problem is a 400 ``unknown_parameter`` or ``invalid_parameter`` naming the parameter.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypeVar, get_args

from multidict import MultiMapping
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError

from registry.catalog import Query
from registry.errors import RegistryError
from registry.meaningsearch import Match
from registry.textsearch import tokenize

__all__ = ["AgentsQuery", "ListingQuery", "SkillsQuery", "read_query"]

VerificationStatus = Literal["verified", "unsigned", "invalid", "untrusted-key"]
HealthStatus = Literal["healthy", "degraded", "unreachable", "unknown"]

_INVALID = "invalid_parameter"
_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no")


def _flag(value: Any, info: ValidationInfo) -> bool:
    """``true``/``1``/``yes`` or ``false``/``0``/``no``, any case; nothing else."""
    lowered = str(value).lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise PydanticCustomError(
        _INVALID,
        "{parameter} must be true or false",
        {"parameter": info.field_name, "value": value},
    )


def _text(value: Any) -> Any:
    """Blank means absent."""
    return value or None


Flag = Annotated[bool | None, BeforeValidator(_flag)]
Text = Annotated[str | None, BeforeValidator(_text)]


class ListingQuery(BaseModel):
    """The catalog filters and paging that both listings take (every given filter holds)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # validated in this order: the first problem is the one reported
    limit: int | None = Field(
        None,
        ge=1,
        description="Page size (default SWITCHBOARD_PAGE_SIZE, at most SWITCHBOARD_MAX_PAGE_SIZE).",
    )
    q: str | None = Field(
        None, description="Free text, ranked against skill names, descriptions, tags, examples."
    )
    match: Match | None = Field(
        None,
        description="How q is ranked: semantic (by meaning, the router's score from 0 to 1) or "
        "lexical (by words, BM25). Default: the router's matcher (SWITCHBOARD_MATCHER).",
    )
    streaming: Flag = Field(None, description="Agents that do (true) or do not (false) stream.")
    push: Flag = Field(None, description="Agents with (true) or without push notifications.")
    verified: Flag = Field(None, description="Agents whose card signature is verified.")
    verification: VerificationStatus | None = Field(
        None, description="Agents whose card's verification has this status."
    )
    health: HealthStatus | None = Field(None, description="Agents whose health has this status.")
    skill: Text = Field(None, description="A skill id (exact).")
    tag: list[str] = Field(
        default_factory=list,
        description="A skill tag (case-insensitive); repeat for several, one skill has them all.",
    )
    input_mode: Text = Field(
        None, description="A media type the skill accepts; wildcards such as image/* work."
    )
    output_mode: Text = Field(None, description="A media type the skill produces; wildcards work.")
    protocol_version: Text = Field(
        None, description="An A2A protocol version such as 0.3 or 1.0 (prefix match)."
    )
    cursor: Text = Field(None, description="The next_cursor of the previous page, unchanged.")

    @field_validator("limit", mode="before")
    @classmethod
    def _limit(cls, value: Any, info: ValidationInfo) -> Any:
        maximum = (info.context or {}).get("max_page_size", 500)
        if not (value.isascii() and value.isdigit()) or not 1 <= int(value) <= maximum:
            raise PydanticCustomError(
                _INVALID,
                "limit must be a whole number from 1 to {maximum}",
                {"parameter": "limit", "value": value, "maximum": maximum},
            )
        return int(value)

    @field_validator("q", mode="before")
    @classmethod
    def _searchable(cls, value: Any) -> Any:
        if not value.strip():
            return None
        if not tokenize(value):
            raise PydanticCustomError(
                _INVALID,
                "q has no searchable words (only punctuation or very common words)",
                {"parameter": "q", "value": value},
            )
        return value.strip()

    @field_validator("match", "verification", "health", mode="before")
    @classmethod
    def _choice(cls, value: Any, info: ValidationInfo) -> Any:
        name = info.field_name or ""
        allowed = list(get_args(get_args(cls.model_fields[name].annotation)[0]))
        if value not in allowed:
            raise PydanticCustomError(
                _INVALID,
                "{parameter} must be one of {choices}",
                {
                    "parameter": name,
                    "value": value,
                    "allowed": allowed,
                    "choices": ", ".join(allowed),
                },
            )
        return value

    @field_validator("tag", mode="after")
    @classmethod
    def _tags(cls, value: list[str]) -> list[str]:
        return [tag for tag in value if tag]

    def catalog_query(self) -> Query:
        """The catalog filters of this query (``health`` and paging are the API's)."""
        return Query(
            q=self.q,
            skill=self.skill,
            tags=tuple(self.tag),
            input_mode=self.input_mode,
            output_mode=self.output_mode,
            streaming=self.streaming,
            push=self.push,
            protocol_version=self.protocol_version,
            verified=self.verified,
            verification=self.verification,
        )


class AgentsQuery(ListingQuery):
    """The query of ``GET /api/v1/agents``: agents with a skill that passes the skill filters."""


class SkillsQuery(ListingQuery):
    """The query of ``GET /api/v1/skills``: one row per skill that passes the filters."""


Q = TypeVar("Q", bound=ListingQuery)


def read_query(model: type[Q], params: MultiMapping[str], *, max_page_size: int) -> Q:
    """``params`` (a query string) validated by ``model``; 400 on anything unknown or bad."""
    names = {(f.alias or name): name for name, f in model.model_fields.items()}
    unknown = sorted(set(params) - set(names))
    if unknown:
        raise RegistryError(
            f"unknown query parameter {unknown[0]!r}",
            code="unknown_parameter",
            details={"unknown": unknown, "allowed": sorted(names)},
        )
    values: dict[str, Any] = {}
    for name in params:
        given = params.getall(name)
        if _is_list(model.model_fields[names[name]].annotation):
            values[name] = given
        elif len(given) > 1:
            raise RegistryError(
                f"query parameter {name!r} given more than once",
                code=_INVALID,
                details={"parameter": name},
            )
        else:
            values[name] = given[0]
    try:
        return model.model_validate(values, context={"max_page_size": max_page_size})
    except ValidationError as exc:
        raise _invalid(exc) from None


def _is_list(annotation: Any) -> bool:
    return getattr(annotation, "__origin__", None) is list


def _invalid(exc: ValidationError) -> RegistryError:
    """The first problem of ``exc`` as the API's error."""
    error = exc.errors(include_url=False)[0]
    context: Mapping[str, Any] = error.get("ctx") or {}
    if error["type"] == _INVALID:
        details = {k: v for k, v in context.items() if k != "choices"}
        return RegistryError(error["msg"], code=_INVALID, details=details)
    name = ".".join(str(part) for part in error["loc"])
    return RegistryError(
        f"{name}: {error['msg']}",
        code=_INVALID,
        details={"parameter": name, "value": error["input"]},
    )
