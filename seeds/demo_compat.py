"""A2A 0.3 as an a2a-sdk 1.3 server in 0.3-compatibility mode speaks it, next to 1.0.

Such a server answers a 0.3 request by running its 1.0 handler and converting the answer, so
the shapes are 0.3's (:class:`~seeds.demo_wire.Wire03`) and the behaviour is 1.0's; captured
in ``tests/fixtures/wire/v1compat_v03_*.out``.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from seeds.demo_model import TERMINAL_STATES, RpcError, Task
from seeds.demo_wire import WIRES, Wire, Wire03, check_major


class Wire03Compat(Wire03):
    """A2A 0.3 as an a2a-sdk 1.3 server in compat mode speaks it: 0.3 shapes, 1.0 behaviour.

    The 1.3 SDK converts its 1.0 answers, so: 1.0 timestamps (``...Z``), ``final`` only on a
    terminal state (a stream still ends at ``input-required``), a subscription opens with a
    Task snapshot, terminal-state errors are 1.0's, params that do not parse are -32600,
    errors carry ``data`` and any code 0.3 does not know (-32009 among them) becomes -32603.
    """

    subscribe_snapshot = True
    _CODES = frozenset({-32700, -32600, -32601, -32602, -32603, *range(-32007, -32000)})

    def timestamp(self, when: datetime) -> str:
        return WIRES["1.0"].timestamp(when)

    def status_event(self, task: Task, final: bool) -> dict[str, Any]:
        return super().status_event(task, task.state in TERMINAL_STATES)

    def terminal_error(self, task: Task) -> RpcError:
        return WIRES["1.0"].terminal_error(task)

    def terminal_send_error(self, task: Task) -> RpcError:
        return self.terminal_error(task)

    def check_version(self, header: str | None) -> None:
        check_major(header, "0.3", "0", -32603)

    def parse_error(self, err: RpcError) -> RpcError:
        if err.code != -32602:
            return err
        return RpcError(-32600, "Invalid Request", data=err.message)

    def error(self, err: RpcError) -> dict[str, Any]:
        code = err.code if err.code in self._CODES else -32603
        return {"code": code, "data": err.data, "message": err.message}

    @staticmethod
    def envelope(req_id: Any, key: str, value: Any) -> dict[str, Any]:
        if key == "error":  # the SDK's own error dict, in its order
            return {"jsonrpc": "2.0", "id": req_id, "error": value}
        return Wire.envelope(req_id, key, value)

    def dumps(self, obj: Any, sse: bool) -> str:
        if "error" in obj:
            return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
        return super().dumps(obj, sse)


COMPAT_WIRE: Wire = Wire03Compat()
"""How a server that also speaks 1.0 speaks 0.3."""
