"""Translating A2A push notification configs between 0.3 and 1.0, as pure functions.

Switchboard relays no push notification config method yet (``-32003``, and a send carrying a
config is refused); this is the translation those methods get when it does (the coming push
relay), kept with its tests. :func:`push_config_to` also serves
:func:`router.compat.translate.params_to` for a send's configuration.

0.3 nests the config (``{taskId, pushNotificationConfig: {url, token, authentication:
{schemes}}}``), 1.0 flattens it (``{taskId, id, url, token, authentication: {scheme},
tenant}``); 0.3 names a get/delete's task ``id`` and its config ``pushNotificationConfigId``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from router.compat.carry import carry, uncarry
from router.protocol.versions import Version, equivalent_method

__all__ = ["push_config_to", "push_params_to", "push_result_to"]


def push_config_to(config: Any, dst: Version) -> Any:
    """A push notification config object: ``authentication.schemes`` (0.3, a list) vs
    ``authentication.scheme`` (1.0, one)."""
    if not isinstance(config, dict) or not isinstance(config.get("authentication"), dict):
        return config
    auth = dict(config["authentication"])
    if dst == "1.0" and "schemes" in auth:
        schemes = auth.pop("schemes")
        if isinstance(schemes, list) and schemes:
            auth["scheme"] = schemes[0]
    elif dst == "0.3" and "scheme" in auth:
        auth["schemes"] = [auth.pop("scheme")]
    return {**config, "authentication": auth}


# --- the push notification config methods ---------------------------------------------------

_PUSH_SET, _PUSH_GET, _PUSH_LIST, _PUSH_DELETE = (
    f"tasks/pushNotificationConfig/{name}" for name in ("set", "get", "list", "delete")
)


def _push_method(method: str) -> str:
    """The 0.3 name of a push notification config method of either version."""
    name = equivalent_method(method, "0.3")
    if name not in (_PUSH_SET, _PUSH_GET, _PUSH_LIST, _PUSH_DELETE):
        raise ValueError(f"{method!r} is not a push notification config method")
    return name


def _flat_config(task_config: Mapping[str, Any], dst: Version) -> dict[str, Any]:
    """0.3 ``{taskId, pushNotificationConfig: {...}}`` <-> 1.0's flat TaskPushNotificationConfig."""
    if dst == "1.0":
        out = {k: v for k, v in task_config.items() if k != "pushNotificationConfig"}
        inner = task_config.get("pushNotificationConfig")
        if isinstance(inner, dict):
            out.update(push_config_to(inner, dst))
        return out
    out = {k: v for k, v in task_config.items() if k in ("taskId",)}
    inner = {k: v for k, v in task_config.items() if k not in ("taskId", "tenant")}
    out["pushNotificationConfig"] = push_config_to(inner, dst)
    return out


def push_params_to(
    method: str, params: Mapping[str, Any], src: Version, dst: Version
) -> dict[str, Any]:
    """The params of a push notification config ``method`` (either version's name) in
    ``dst``'s shape. Switchboard does not relay these methods (``-32003``); this is the
    translation they get when it does. ValueError for another method."""
    name = _push_method(method)
    if src == dst:
        return dict(params)
    if name == _PUSH_SET:
        return _flat_config(params, dst)
    if dst == "1.0":  # 0.3 names the task ``id`` and the config ``pushNotificationConfigId``
        out: dict[str, Any] = {"taskId": params.get("id")}
        if name != _PUSH_LIST and "pushNotificationConfigId" in params:
            out["id"] = params["pushNotificationConfigId"]
        carried = uncarry(dict(params))
        if "tenant" in carried:
            out["tenant"] = carried["tenant"]
        return out
    out = {"id": params.get("taskId")}
    if name != _PUSH_LIST and "id" in params:
        out["pushNotificationConfigId"] = params["id"]
    if "tenant" in params:
        carry(out, {"tenant": params["tenant"]})
    return out


def push_result_to(method: str, result: Any, src: Version, dst: Version) -> Any:
    """The result of a push notification config ``method`` in ``dst``'s shape: a config
    (set, get), a list (0.3 an array, 1.0 ``{"configs", "nextPageToken"}``), nothing
    (delete: 0.3 ``null``, 1.0 ``{}``)."""
    name = _push_method(method)
    if src == dst:
        return result
    if name == _PUSH_DELETE:
        return {} if dst == "1.0" else None
    if name == _PUSH_LIST:
        configs = result.get("configs") if isinstance(result, dict) else result
        if not isinstance(configs, list):
            return result
        items = [_flat_config(c, dst) if isinstance(c, dict) else c for c in configs]
        return {"configs": items} if dst == "1.0" else items
    return _flat_config(result, dst) if isinstance(result, dict) else result
