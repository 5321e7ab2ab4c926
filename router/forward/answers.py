"""What an agent answered, read strictly: :func:`parse_answer` turns an answer's bytes (or
an SSE event's data) into JSON, refusing what could not be written back unchanged
(non-standard constants, numbers beyond a double's range, integers too long, nesting deeper
than the limit), and :func:`is_response` says whether it is a JSON-RPC 2.0 response object.
:mod:`router.forward.upstream` turns the two failures into its errors: :class:`NotJson` is
an agent that did not answer in JSON (-32052), :class:`Unacceptable` an invalid answer
(-32006).
"""

from __future__ import annotations

import json
import math
from typing import Any

from registry.jsonsafe import json_depth

__all__ = ["NotJson", "Unacceptable", "is_response", "parse_answer"]


class NotJson(ValueError):
    """The bytes are not JSON at all."""


class Unacceptable(ValueError):
    """JSON, but not acceptable (non-standard constants, non-finite numbers, too deep)."""


def parse_answer(raw: bytes | str, max_depth: int) -> Any:
    """``raw`` (UTF-8, a BOM allowed) as JSON nested at most ``max_depth`` deep."""
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise NotJson("the answer is not UTF-8 text") from None
    if not raw.strip():
        raise NotJson("the answer is empty, not JSON")
    if raw.startswith("\ufeff"):  # as json.loads says it
        raise NotJson("the answer is not JSON (Unexpected UTF-8 BOM (decode using utf-8-sig))")
    try:
        value = _DECODER.decode(raw)
    except RecursionError:
        raise Unacceptable(f"JSON nested deeper than {max_depth} levels") from None
    except Unacceptable:
        raise
    except json.JSONDecodeError as exc:
        raise NotJson(f"the answer is not JSON ({exc.msg})") from None
    except ValueError:  # valid syntax, but an integer too long for int() (4300 digits)
        raise Unacceptable("an integer in the JSON is too long") from None
    # a value is nested no deeper than the text has brackets (a cheap bound: most answers
    # need no walk)
    if (
        raw.count("{") + raw.count("[") > max_depth
        and json_depth(value, stop_after=max_depth) > max_depth
    ):
        raise Unacceptable(f"JSON nested deeper than {max_depth} levels")
    return value


def is_response(obj: Any) -> bool:
    """A JSON-RPC 2.0 response object: ``result`` xor a well-formed ``error``."""
    if not isinstance(obj, dict) or obj.get("jsonrpc", "2.0") != "2.0":
        return False
    if ("result" in obj) == ("error" in obj):
        return False
    if "error" in obj:
        error = obj["error"]
        return (
            isinstance(error, dict)
            and isinstance(error.get("code"), int)
            and not isinstance(error.get("code"), bool)
            and isinstance(error.get("message"), str)
        )
    return True


def _reject_constant(name: str) -> Any:
    raise Unacceptable(f"{name} is not allowed in JSON")


def _finite_float(text: str) -> float:
    """A JSON number with a fraction or exponent; one beyond a double's range (``1e400``)
    would become ``inf`` and could not be written back as JSON."""
    value = float(text)
    if not math.isfinite(value):
        shown = text if len(text) <= 40 else f"{text[:37]}..."
        raise Unacceptable(f"the number {shown} is out of range")
    return value


_DECODER = json.JSONDecoder(parse_float=_finite_float, parse_constant=_reject_constant)
