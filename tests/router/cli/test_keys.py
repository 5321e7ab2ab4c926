"""``keys secret``: a new key for SWITCHBOARD_SECRET_KEY, printed alone (for ``$(...)``)."""

from __future__ import annotations

import pytest

from registry.access.secrets import SecretBox
from router.cli import main


def test_keys_secret_prints_a_new_fernet_key(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["keys", "secret"]) == 0
    first = capsys.readouterr().out
    assert main(["keys", "secret"]) == 0
    second = capsys.readouterr().out
    assert first.endswith("\n") and first.count("\n") == 1 and len(first.strip()) == 44
    assert first != second
    box = SecretBox([first.strip()])
    assert box.decrypt(box.encrypt("x")) == "x"
