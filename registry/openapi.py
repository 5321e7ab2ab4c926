"""The OpenAPI 3.1 document of the admin API (``/api/v1/openapi.json``), generated.

Paths, methods and path parameters come from the application's route table (every route
under ``/api/v1``); what a route does not say, each handler says with :func:`documented`: a
summary, tags, the models of its body, query and answer, the errors it may give. The
schemas are pydantic's JSON Schema of those models (:mod:`registry.apimodels`,
:mod:`registry.queryparams` and the router's own); auth comes from the same rule the
middleware applies. A route without :func:`documented` is an error, not a gap.
"""

from __future__ import annotations

import inspect
import re
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from aiohttp import web
from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from registry.apimodels import Error

PREFIX = "/api/v1"
REF = "#/components/schemas/{model}"

Access = Literal["public", "read", "write", "admin"]
AccessRule = Callable[[str, str], Access]
#: An answer: a model (JSON), a media type (a body without a schema), or None (no body).
Answer = type[BaseModel] | str | None
H = TypeVar("H", bound=Callable[..., Any])

_ERRORS = {
    400: "Bad request: the body or a parameter (see error.code)",
    401: "No or a wrong bearer token",
    403: "Writes are disabled (no SWITCHBOARD_ADMIN_TOKEN)",
    404: "No such resource",
    409: "Conflict with the current state",
    413: "The body is too large",
    415: "The body is not JSON",
    422: "A card or key that cannot be used (see error.details)",
    502: "An agent or URL behind the request failed",
}
_PATH_PARAM = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True)
class Operation:
    """What the route table does not say about one route."""

    summary: str
    tags: tuple[str, ...]
    answer: Answer = None
    status: int = 200
    body: type[BaseModel] | None = None
    body_required: bool = True
    query: type[BaseModel] | None = None
    errors: tuple[int, ...] = ()
    params: Mapping[str, str] = field(default_factory=dict)  # path parameter descriptions


_OPERATIONS: dict[Callable[..., Any], Operation] = {}
_DOCUMENTS: weakref.WeakKeyDictionary[web.Application, dict[str, Any]] = weakref.WeakKeyDictionary()


def documented(
    summary: str,
    *tags: str,
    answer: Answer = None,
    status: int = 200,
    body: type[BaseModel] | None = None,
    body_required: bool = True,
    query: type[BaseModel] | None = None,
    errors: tuple[int, ...] = (),
    params: Mapping[str, str] | None = None,
) -> Callable[[H], H]:
    """Decorate a handler with its :class:`Operation` (the handler itself is unchanged)."""
    operation = Operation(
        summary, tags, answer, status, body, body_required, query, errors, params or {}
    )

    def mark(handler: H) -> H:
        _OPERATIONS[handler] = operation
        return handler

    return mark


def openapi_document(app: web.Application, access: AccessRule) -> dict[str, Any]:
    """The document of ``app``'s ``/api/v1`` routes (built once per app); ``access`` tells
    which token a method and path need."""
    document = _DOCUMENTS.get(app)
    if document is None:
        document = _DOCUMENTS[app] = _build(list(_routes(app)), access)
    return document


def _routes(app: web.Application) -> Iterator[tuple[str, str, Callable[..., Any], Operation]]:
    """(method, path, handler, operation) of every documented route under the prefix."""
    for route in app.router.routes():
        info = route.resource.get_info() if route.resource else {}
        path = info.get("path") or info.get("formatter")
        if not path or not path.startswith(PREFIX + "/") or route.method == "HEAD":
            continue
        operation = _OPERATIONS.get(route.handler)
        if operation is None:
            raise LookupError(
                f"{route.method} {path} has no @documented operation: document its handler "
                f"{getattr(route.handler, '__qualname__', route.handler)!r}"
            )
        yield route.method, path, route.handler, operation


def _build(
    routes: list[tuple[str, str, Callable[..., Any], Operation]], access: AccessRule
) -> dict[str, Any]:
    models: dict[tuple[type[BaseModel], JsonSchemaMode], None] = {(Error, "serialization"): None}
    for _, _, _, op in routes:
        if op.body is not None:
            models[(op.body, "validation")] = None
        if isinstance(op.answer, type):
            models[(op.answer, "serialization")] = None
    refs, schemas = models_json_schema(list(models), ref_template=REF)
    paths: dict[str, dict[str, Any]] = {}
    for method, path, handler, op in routes:
        item = paths.setdefault(path, {})
        item[method.lower()] = _operation(method, path, handler, op, refs, access(method, path))
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Switchboard admin API",
            "version": "1",
            "description": "Registry of A2A agents: register, search, inspect, refresh; the "
            "router's explain and feedback. Generated from the routes and their models.",
        },
        "paths": paths,
        "components": {
            "schemas": schemas.get("$defs", {}),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }


def _operation(
    method: str,
    path: str,
    handler: Callable[..., Any],
    op: Operation,
    refs: Mapping[tuple[type[BaseModel], JsonSchemaMode], Any],
    access: Access,
) -> dict[str, Any]:
    out: dict[str, Any] = {"operationId": handler.__name__, "summary": op.summary}
    description = inspect.getdoc(handler)
    if description:
        out["description"] = description
    out["tags"] = list(op.tags)
    parameters = [
        {
            "name": name,
            "in": "path",
            "required": True,
            **({"description": op.params[name]} if name in op.params else {}),
            "schema": {"type": "string"},
        }
        for name in _PATH_PARAM.findall(path)
    ]
    if op.query is not None:
        parameters += _query_parameters(op.query)
    if parameters:
        out["parameters"] = parameters
    errors = set(op.errors)
    if op.body is not None:
        out["requestBody"] = {
            "required": op.body_required,
            "content": {"application/json": {"schema": refs[(op.body, "validation")]}},
        }
        errors |= {400, 413, 415}
    if op.query is not None:
        errors.add(400)
    if access in ("write", "admin"):
        out["security"] = [{"bearer": []}]
        errors |= {401, 403}
    elif access == "read":
        out["security"] = [{}, {"bearer": []}]  # a token only when SWITCHBOARD_READ_TOKEN is set
        errors.add(401)
    else:
        out["security"] = []
    error = {"application/json": {"schema": refs[(Error, "serialization")]}}
    out["responses"] = {
        str(op.status): _answer(op.answer, refs),
        **{str(code): {"description": _ERRORS[code], "content": error} for code in sorted(errors)},
    }
    return out


def _answer(answer: Answer, refs: Mapping[tuple[type[BaseModel], JsonSchemaMode], Any]) -> Any:
    if answer is None:
        return {"description": "No content"}
    if isinstance(answer, str):
        return {"description": "OK", "content": {answer: {}}}
    return {
        "description": (answer.__doc__ or "OK").strip().splitlines()[0],
        "content": {"application/json": {"schema": refs[(answer, "serialization")]}},
    }


def _query_parameters(model: type[BaseModel]) -> list[dict[str, Any]]:
    """One ``in: query`` parameter per field of ``model`` (nullable means: may be left out)."""
    schema = model.model_json_schema(ref_template=REF)
    required = set(schema.get("required", ()))
    parameters = []
    for name, prop in schema["properties"].items():
        prop = dict(prop)
        description = prop.pop("description", None)
        prop.pop("title", None)
        options = [o for o in prop.pop("anyOf", ()) if o != {"type": "null"}]
        if len(options) == 1:
            prop.update(options[0])
        elif options:
            prop["anyOf"] = options
        if prop.get("default") is None:
            prop.pop("default", None)
        parameter: dict[str, Any] = {"name": name, "in": "query", "required": name in required}
        if description:
            parameter["description"] = description
        parameter["schema"] = prop
        parameters.append(parameter)
    return parameters
