"""The clients' push configs: stored under router task and config id, replaced in place
(keeping the receiver the agent knows), a send's config bound to its task once."""

from __future__ import annotations

from dataclasses import replace

import pytest
from sqlmodel import select

from registry.access.secrets import SecretBox, SecretError, generate_key
from registry.store import Store
from router.push.configs import SEALED, PushConfig, PushConfigs, new_receiver
from router.tables import PushConfigRow


def _config(task_id: str | None = "task-1", config_id: str | None = "c1") -> PushConfig:
    key, token = new_receiver()
    return PushConfig(
        receiver_key=key, receiver_token=token, task_id=task_id, config_id=config_id,
        scope="alice", agent_id="agent", version="1.0", url="https://hooks.example/a",
    )  # fmt: skip


async def test_a_config_is_replaced_in_place_and_keeps_its_receiver(store: Store) -> None:
    configs = PushConfigs(store)
    first, new = await configs.put(_config())
    assert new
    again, new = await configs.put(replace(_config(), url="https://hooks.example/b"))
    assert not new and again.receiver_key == first.receiver_key
    assert again.receiver_token == first.receiver_token
    [stored] = await configs.list("task-1")
    assert stored.url == "https://hooks.example/b" and stored.scope == "alice"
    assert (await configs.by_receiver(first.receiver_key)) == stored
    assert await configs.delete("task-1", "c1") == stored
    assert await configs.get("task-1", "c1") is None
    assert await configs.delete("task-1", "c1") is None


async def test_a_sends_config_is_bound_to_the_first_task_only(store: Store) -> None:
    configs = PushConfigs(store)
    pending, _ = await configs.put(_config(task_id=None, config_id=None))
    bound = await configs.bind(pending.receiver_key, "task-9")
    assert bound is not None and (bound.task_id, bound.config_id) == ("task-9", "task-9")
    assert await configs.bind(pending.receiver_key, "task-10") is None
    assert await configs.bind("unknown", "task-9") is None
    assert [c.config_id for c in await configs.list("task-9")] == ["task-9"]


async def test_secrets_are_sealed_with_a_key_and_need_it_to_be_read(store: Store) -> None:
    box = SecretBox([generate_key()])
    sealed = PushConfigs(store, box)
    secret = replace(_config(), token="tok", authentication={"scheme": "Bearer",
                                                              "credentials": "cred"})  # fmt: skip
    await sealed.put(secret)
    assert (await sealed.get("task-1", "c1")) == secret  # read back in clear
    async with store.session() as session:
        row = (await session.exec(select(PushConfigRow))).one()
    assert row.token is not None and row.token.startswith(SEALED) and "tok" not in row.token[7:]
    assert row.authentication is not None
    assert row.authentication["credentials"].startswith(SEALED)
    with pytest.raises(SecretError, match="SWITCHBOARD_SECRET_KEY"):
        await PushConfigs(store).get("task-1", "c1")  # the key was removed
    plain = PushConfigs(store)  # no key: stored as given, and read as such
    await plain.put(replace(_config("task-2"), token="tok2"))
    assert (await sealed.get("task-2", "c1")) is not None  # a key still reads clear ones
    assert await plain.any_secret()
