"""The legacy dialects' calls as the calls the router serves.

:func:`served_call` is what :func:`router.protocol.envelope.parse_request` is given (its
``dialects``) to read an A2A v0.1 call (:func:`router.compat.v01.v01_to_v03`) or an
``A2A.``-prefixed one (:func:`router.compat.prefixed.prefixed_to_v1`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from router.compat.prefixed import prefixed_to_v1
from router.compat.v01 import v01_to_v03
from router.protocol.versions import Dialect

__all__ = ["served_call"]


def served_call(
    dialect: Dialect, method: str, params: Mapping[str, Any]
) -> tuple[str, dict[str, Any], str | None]:
    """The served method, params and the task ID a v0.1 client chose (None for others) of a
    ``dialect`` call ("0.1" or "1.0-prefixed"); RpcError as the dialect's reader raises."""
    if dialect == "1.0-prefixed":
        name, out = prefixed_to_v1(method, params)
        return name, out, None
    call = v01_to_v03(method, params)
    return call.method, call.params, call.client_task_id
