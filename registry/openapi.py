"""The OpenAPI 3.1 document of the admin API (served at ``/api/v1/openapi.json``).

Hand-written so it reads like documentation; a test checks that its paths and methods are
exactly the routes the application serves.
"""

from __future__ import annotations

from functools import cache
from typing import Any

_ID = {"name": "agent_id", "in": "path", "required": True, "schema": {"type": "string"}}
_SKILL_ID = {"name": "skill_id", "in": "path", "required": True, "schema": {"type": "string"}}
_EXAMPLE_ID = {"name": "example_id", "in": "path", "required": True, "schema": {"type": "string"}}
_KEY_ID = {
    "name": "key_id",
    "in": "path",
    "required": True,
    "description": "The anchor id: a JWK's RFC 7638 thumbprint, or jwks-<16 hex> for a URL.",
    "schema": {"type": "string"},
}


def _param(name: str, description: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "description": description,
        "schema": schema or {"type": "string"},
    }


_FILTERS = [
    _param("q", "Free text, ranked against skill names, descriptions, tags and examples."),
    _param("skill", "A skill id (exact)."),
    _param(
        "tag",
        "A skill tag (case-insensitive); repeat for several, all must match one skill.",
        {"type": "array", "items": {"type": "string"}},
    ),
    _param("input_mode", "A media type the skill accepts; wildcards such as image/* work."),
    _param("output_mode", "A media type the skill produces; wildcards work."),
    _param("streaming", "Agents that do (true) or do not (false) stream.", {"type": "boolean"}),
    _param("push", "Agents with push notifications.", {"type": "boolean"}),
    _param("protocol_version", "A2A protocol version, e.g. 0.3 or 1.0 (prefix match)."),
    _param(
        "health",
        "Agents whose health.status is this: healthy, degraded, unreachable or unknown.",
    ),
    _param("limit", "Page size (default 50, at most 500).", {"type": "integer", "minimum": 1}),
    _param("cursor", "The next_cursor of the previous page, unchanged."),
]

_ERROR = {
    "description": "Error",
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
}


def _json(ref: str, description: str = "OK") -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{ref}"}}},
    }


def _op(
    summary: str,
    responses: dict[str, Any],
    *,
    params: list[dict[str, Any]] | None = None,
    body: str | None = None,
    write: bool = False,
) -> dict[str, Any]:
    op: dict[str, Any] = {"summary": summary, "responses": {**responses, "4XX": _ERROR}}
    if params:
        op["parameters"] = params
    if body:
        op["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{body}"}}},
        }
    op["security"] = [{"bearer": []}] if write else [{}, {"bearer": []}]
    return op


_SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "message"],
                "properties": {
                    "code": {"type": "string"},
                    "message": {"type": "string"},
                    "details": {},
                },
            }
        },
    },
    "Interface": {
        "type": "object",
        "properties": {
            "url": {"type": "string"},
            "binding": {"type": "string", "examples": ["JSONRPC", "HTTP+JSON", "GRPC"]},
            "protocol_version": {"type": "string"},
            "tenant": {"type": ["string", "null"]},
        },
    },
    "Skill": {
        "type": "object",
        "required": ["id", "name", "tags", "input_modes", "output_modes"],
        "properties": {
            "id": {"type": "string"},
            "name": {"type": "string"},
            "description": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "examples": {"type": "array", "items": {"type": "string"}},
            "input_modes": {"type": "array", "items": {"type": "string"}},
            "output_modes": {"type": "array", "items": {"type": "string"}},
        },
    },
    "Agent": {
        "type": "object",
        "required": ["id", "name", "description", "interfaces", "skills"],
        "properties": {
            "id": {"type": "string"},
            "name": {"type": "string"},
            "description": {"type": "string"},
            "version": {"type": "string"},
            "card_format": {"type": "string", "enum": ["1.0", "0.3", "0.2", "0.1"]},
            "protocol_versions": {"type": "array", "items": {"type": "string"}},
            "provider": {"type": ["object", "null"]},
            "interfaces": {"type": "array", "items": {"$ref": "#/components/schemas/Interface"}},
            "capabilities": {"type": "object"},
            "default_input_modes": {"type": "array", "items": {"type": "string"}},
            "default_output_modes": {"type": "array", "items": {"type": "string"}},
            "skills": {"type": "array", "items": {"$ref": "#/components/schemas/Skill"}},
            "source": {"type": "object"},
            "card_url": {"type": ["string", "null"]},
            "card_sha256": {"type": "string"},
            "created_at": {"type": "string", "format": "date-time"},
            "updated_at": {"type": "string", "format": "date-time"},
            "fetched_at": {"type": "string", "format": "date-time"},
            "routable": {"type": "boolean"},
            "health": {"$ref": "#/components/schemas/Health"},
            "score": {"type": "number", "description": "Only when searching with q."},
            "matched_skills": {"type": "array", "items": {"type": "string"}},
            "card": {"type": "object", "description": "The raw card (single-agent views)."},
        },
    },
    "Health": {
        "type": "object",
        "required": ["status", "consecutive_failures"],
        "properties": {
            "status": {
                "type": "string",
                "enum": ["healthy", "degraded", "unreachable", "unknown"],
            },
            "last_error": {"type": ["string", "null"]},
            "last_success": {"type": ["string", "null"], "format": "date-time"},
            "last_failure": {"type": ["string", "null"], "format": "date-time"},
            "last_checked": {"type": ["string", "null"], "format": "date-time"},
            "consecutive_failures": {"type": "integer"},
            "next_check_at": {"type": ["string", "null"], "format": "date-time"},
            "next_card_at": {"type": ["string", "null"], "format": "date-time"},
            "refresh_interval": {"type": ["number", "null"]},
            "card_error": {"type": ["string", "null"]},
        },
    },
    "AgentSettings": {
        "type": "object",
        "required": ["refresh_interval"],
        "properties": {
            "refresh_interval": {
                "type": ["number", "null"],
                "description": "Seconds between refreshes of this agent; null: the default.",
            }
        },
    },
    "RefreshRequest": {
        "type": "object",
        "description": "Empty: the checks due now. all: every agent now. ids: these agents now.",
        "properties": {
            "all": {"type": "boolean"},
            "ids": {"type": "array", "items": {"type": "string"}},
        },
    },
    "RefreshReport": {
        "type": "object",
        "properties": {
            "checked": {"type": "integer"},
            "changed": {"type": "array", "items": {"type": "string"}},
            "failed": {"type": "array", "items": {"type": "object"}},
            "skipped": {"type": "array", "items": {"type": "string"}},
        },
    },
    "AgentList": {
        "type": "object",
        "properties": {
            "agents": {"type": "array", "items": {"$ref": "#/components/schemas/Agent"}},
            "next_cursor": {"type": ["string", "null"]},
        },
    },
    "SkillList": {
        "type": "object",
        "properties": {
            "skills": {"type": "array", "items": {"type": "object"}},
            "next_cursor": {"type": ["string", "null"]},
        },
    },
    "Registration": {
        "type": "object",
        "description": 'Exactly one of "url" or "card"; "id" is optional.',
        "properties": {
            "url": {"type": "string", "description": "Agent base URL or exact card URL."},
            "card": {"type": "object", "description": "The agent card JSON."},
            "id": {"type": "string", "pattern": "^[a-z0-9][a-z0-9._-]{0,63}$"},
            "refresh_interval": {
                "type": ["number", "null"],
                "description": "Seconds between refreshes of this agent; default: the setting.",
            },
        },
    },
    "Card": {"type": "object", "description": "An A2A agent card (0.1 to 1.0 shapes)."},
    "Refresh": {
        "type": "object",
        "properties": {
            "agent": {"$ref": "#/components/schemas/Agent"},
            "changed": {"type": "boolean"},
        },
    },
    "Revisions": {
        "type": "object",
        "properties": {
            "revisions": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "sha256": {"type": "string"},
                        "fetched_at": {"type": "string", "format": "date-time"},
                        "card_url": {"type": ["string", "null"]},
                        "size": {"type": "integer"},
                        "verification_status": {"type": ["string", "null"]},
                        "initial": {"type": "boolean"},
                        "diff": {"type": "object", "description": "See docs/admin-api.md."},
                    },
                },
            }
        },
    },
    "Stats": {"type": "object"},
    "ExplainRequest": {
        "type": "object",
        "required": ["message"],
        "properties": {
            "message": {"type": "object", "description": "An A2A message (0.3 or 1.0 shape)."},
            "configuration": {"type": "object"},
            "metadata": {"type": "object"},
            "stream": {"type": "boolean", "description": "Explain a streaming call."},
            "version": {"type": "string", "enum": ["0.3", "1.0"]},
        },
    },
    "Explain": {
        "type": "object",
        "properties": {
            "version": {"type": "string"},
            "matcher": {"type": "string", "description": "semantic (model) or lexical (why)"},
            "model": {"type": "string"},
            "floor": {"type": "number"},
            "margin_needed": {"type": "number"},
            "score": {"type": "number"},
            "margin": {"type": ["number", "null"]},
            "uncertain": {"type": ["string", "null"]},
            "adjudicator": {"type": "object"},
            "candidates": {"type": "array", "items": {"type": "object"}},
            "choice": {"type": ["object", "null"], "description": "With tier and margin."},
            "error": {"type": ["object", "null"]},
        },
    },
    "Feedback": {
        "type": "object",
        "required": ["agent"],
        "description": 'Exactly one of "task_id", "message", "text".',
        "properties": {
            "task_id": {"type": "string", "description": "A task the router gave out."},
            "message": {"type": "object", "description": "An A2A message (0.3 or 1.0)."},
            "text": {"type": "string"},
            "agent": {"type": "string", "description": "The agent that should answer."},
            "skill": {"type": "string", "description": "Default: the closest skill."},
            "version": {"type": "string", "enum": ["0.3", "1.0"]},
        },
    },
    "LearnedExample": {
        "type": "object",
        "properties": {
            k: {"type": ["string", "null"]}
            for k in ("id", "agent_id", "skill_id", "text", "source", "task_id", "created_at")
        },
    },
    "FeedbackResult": {
        "type": "object",
        "properties": {
            "example": {"$ref": "#/components/schemas/LearnedExample"},
            "learned": {"type": "boolean"},
            "before": {"type": "object"},
            "after": {"type": "object"},
            "warning": {"type": "string"},
        },
    },
    "ExampleList": {
        "type": "object",
        "properties": {
            "examples": {
                "type": "array",
                "items": {"$ref": "#/components/schemas/LearnedExample"},
            },
            "card_examples": {"type": "array", "items": {"type": "string"}},
        },
    },
    "TrustedKey": {
        "type": "object",
        "required": ["id", "kind", "source", "created_at"],
        "properties": {
            "id": {"type": "string"},
            "kind": {"type": "string", "enum": ["jwk", "jwks_url"]},
            "kid": {"type": ["string", "null"]},
            "kty": {"type": ["string", "null"]},
            "alg": {"type": ["string", "null"]},
            "jwk": {"type": ["object", "null"], "description": "Public members only."},
            "jwks_url": {"type": ["string", "null"]},
            "source": {"type": "string", "enum": ["api", "seed"]},
            "created_at": {"type": "string", "format": "date-time"},
        },
    },
    "TrustedKeyList": {
        "type": "object",
        "properties": {
            "keys": {"type": "array", "items": {"$ref": "#/components/schemas/TrustedKey"}}
        },
    },
    "NewTrustedKey": {
        "type": "object",
        "description": 'Exactly one of "jwk" or "jwks_url".',
        "properties": {
            "jwk": {"type": "object", "description": "A public JWK (EC, RSA or OKP)."},
            "jwks_url": {"type": "string", "description": "A JWKS URL, fetched once to check."},
        },
    },
}


@cache
def openapi_document() -> dict[str, Any]:
    """The OpenAPI document (built once)."""
    agent = {"parameters": [_ID]}
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Switchboard admin API",
            "version": "1",
            "description": "Registry of A2A agents: register, search, inspect, refresh.",
        },
        "paths": {
            "/api/v1/openapi.json": {
                "get": {"summary": "This document", "responses": {"200": {"description": "OK"}}}
            },
            "/api/v1/agents": {
                "get": _op("Search agents", {"200": _json("AgentList")}, params=_FILTERS),
                "post": _op(
                    "Register an agent by URL or card",
                    {"201": _json("Agent", "Registered")},
                    body="Registration",
                    write=True,
                ),
            },
            "/api/v1/agents/{agent_id}": {
                **agent,
                "get": _op("One agent with its raw card", {"200": _json("Agent")}),
                "patch": _op(
                    "Change an agent's refresh interval",
                    {"200": _json("Agent")},
                    body="AgentSettings",
                    write=True,
                ),
                "delete": _op("Remove an agent", {"204": {"description": "Removed"}}, write=True),
            },
            "/api/v1/agents/{agent_id}/card": {
                **agent,
                "get": _op("The card as fetched or pushed", {"200": _json("Card")}),
                "put": _op(
                    "Replace a pushed agent's card",
                    {"200": _json("Agent")},
                    body="Card",
                    write=True,
                ),
            },
            "/api/v1/agents/{agent_id}/refresh": {
                **agent,
                "post": _op("Fetch the card again now", {"200": _json("Refresh")}, write=True),
            },
            "/api/v1/agents/{agent_id}/revisions": {
                **agent,
                "get": _op("Card revisions, newest first", {"200": _json("Revisions")}),
            },
            "/api/v1/refresh": {
                "post": _op(
                    "Run the checks due now, or check every agent or some now",
                    {"200": _json("RefreshReport")},
                    body="RefreshRequest",
                    write=True,
                ),
            },
            "/api/v1/skills": {
                "get": _op("Search skills", {"200": _json("SkillList")}, params=_FILTERS),
            },
            "/api/v1/route/explain": {
                "post": {
                    **_op(
                        "Which agent a message would be routed to, and why",
                        {"200": _json("Explain")},
                        body="ExplainRequest",
                    ),
                    "security": [{}, {"bearer": []}],
                }
            },
            "/api/v1/route/feedback": {
                "post": _op(
                    "Teach the router: a message becomes a learned example of the right skill",
                    {"201": _json("FeedbackResult", "Learned")},
                    body="Feedback",
                    write=True,
                )
            },
            "/api/v1/skills/{agent_id}/{skill_id}/examples": {
                "parameters": [_ID, _SKILL_ID],
                "get": _op("A skill's learned examples", {"200": _json("ExampleList")}),
                "delete": _op(
                    "Delete every learned example of a skill",
                    {"204": {"description": "Deleted"}},
                    write=True,
                ),
            },
            "/api/v1/skills/{agent_id}/{skill_id}/examples/{example_id}": {
                "parameters": [_ID, _SKILL_ID, _EXAMPLE_ID],
                "delete": _op(
                    "Delete one learned example", {"204": {"description": "Deleted"}}, write=True
                ),
            },
            "/api/v1/stats": {"get": _op("Catalog counts", {"200": _json("Stats")})},
            "/api/v1/keys": {
                "get": _op("Trusted signing keys", {"200": _json("TrustedKeyList")}),
                "post": _op(
                    "Trust a public JWK or a JWKS URL",
                    {"201": _json("TrustedKey", "Trusted")},
                    body="NewTrustedKey",
                    write=True,
                ),
            },
            "/api/v1/keys/{key_id}": {
                "parameters": [_KEY_ID],
                "get": _op("One trusted key", {"200": _json("TrustedKey")}),
                "delete": _op(
                    "Stop trusting a key", {"204": {"description": "Removed"}}, write=True
                ),
            },
        },
        "components": {
            "schemas": _SCHEMAS,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }
