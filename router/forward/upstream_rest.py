"""One request of :class:`router.forward.upstream.Upstream` in the agent's binding: a
:class:`Leg` says what to send (verb, URL, body) and reads the answers back as JSON-RPC
response objects, so that everything after the edge (ID rewriting, translation, relays)
sees one shape whatever the binding.

A JSON-RPC interface gets the JSON-RPC request POSTed to its URL and its answers as they
are. An HTTP+JSON interface gets the path of :func:`router.protocol.restpaths.rest_call`
under its URL (a 0.3 body written as ProtoJSON by :mod:`router.compat.protojson03`); its
2xx body becomes ``{"result": ...}`` (a 0.3 one read back from ProtoJSON), its HTTP error
answer ``{"error": ...}`` (:func:`router.protocol.restpaths.rest_error`), and each SSE event
a result, or an error for an ``error`` event.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, replace
from typing import Any

from yarl import URL

from router.choose.choice import HTTP_JSON, Target
from router.compat import protojson03
from router.protocol.errors import UNSUPPORTED, RpcError
from router.protocol.restpaths import RestCall, rest_call, rest_error

__all__ = ["Leg", "leg"]


@dataclass(frozen=True)
class Leg:
    """What one call sends (``verb`` ``url`` with ``body``) and how its answers read back;
    ``rest`` is None for a JSON-RPC interface."""

    verb: str
    url: URL
    body: bytes | None
    request_id: Any
    rest: RestCall | None = None
    stand_in: bool = False  # a stand-in request id was sent for this one (see :func:`leg`)

    def sent(self) -> Leg:
        """This leg once its request is sent: the same, without the request's bytes."""
        return self if self.body is None else replace(self, body=None)

    def answer(self, status: int, obj: Any) -> Any:
        """The agent's answer (parsed JSON; None for an empty 2xx body of a REST call) as a
        JSON-RPC response object; an HTTP+JSON body that is neither a result nor an error is
        returned as it came, for the caller to judge."""
        if self.rest is None:
            return self._own_id(obj)
        if status >= 400:
            error = rest_error(self.rest, status, obj)
            return obj if error is None else self._response("error", error)
        return self._result(obj)

    def event(self, name: str, obj: Any) -> Any:
        """One SSE event's data as a JSON-RPC response object (an ``error`` event of an
        HTTP+JSON stream: the error)."""
        if self.rest is None:
            return self._own_id(obj)
        if name == "error":
            error = rest_error(self.rest, 500, obj)
            return obj if error is None else self._response("error", error)
        return self._result(obj)

    def _own_id(self, obj: Any) -> Any:
        if self.stand_in and isinstance(obj, dict) and "id" in obj:
            return {**obj, "id": self.request_id}
        return obj

    def _result(self, obj: Any) -> dict[str, Any]:
        assert self.rest is not None
        result = protojson03.result_in(obj) if self.rest.version == "0.3" else obj
        return self._response("result", result)

    def _response(self, member: str, value: Any) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": self.request_id, member: value}


def leg(target: Target, url: URL, method: str, params: dict[str, Any], request_id: Any) -> Leg:
    """The request of JSON-RPC ``method`` with ``params`` to ``target`` at its checked
    ``url``. Raises RpcError -32004 when the agent's HTTP+JSON binding has no path for it.

    A JSON-RPC request without an id (a call that came in over HTTP+JSON has none), or with
    one that is not a string or an integer (``1.5``: JSON-RPC allows any number), goes with a
    stand-in id, which SDK servers require (the a2a-sdk 0.3 one refuses ``"id": null``, its
    pydantic models any fraction); the answers get the client's id back."""
    if target.binding != HTTP_JSON:
        plain = isinstance(request_id, str | int) and not isinstance(request_id, bool)
        sent = request_id if plain else f"switchboard-{uuid.uuid4().hex}"
        body = _dumps(_jsonrpc(method, params, sent))
        return Leg("POST", url, body, request_id, stand_in=not plain)
    call = rest_call(target.version, method, params)
    if call is None:
        raise RpcError(
            UNSUPPORTED,
            f"Agent {target.agent_id} is reached over HTTP+JSON, which has no path for {method}",
            {"agent": target.agent_id, "method": method, "binding": HTTP_JSON},
        )
    body: bytes | None = None
    if call.body is not None:
        document = call.body
        if call.version == "0.3":
            document = protojson03.request_out(method, call.body)
        body = _dumps(document)
    base = str(url.with_query(None).with_fragment(None)).rstrip("/")
    full = URL(base + call.path, encoded=True)
    if call.query:
        full = full.with_query(list(call.query))
    return Leg(call.verb, full, body, request_id, call)


def _jsonrpc(method: str, params: dict[str, Any], request_id: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def _dumps(document: Any) -> bytes:
    return json.dumps(document, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
