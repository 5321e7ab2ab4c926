"""SecretBox: Fernet round trips, key rotation, wrong and missing keys, keys from a file."""

from __future__ import annotations

from pathlib import Path

import pytest

from registry.access.secrets import SecretBox, SecretError, generate_key
from tests.support.helpers import make_settings

SECRET = "s3cr3t-value-\u00e9"


def test_round_trip_stores_ciphertext() -> None:
    box = SecretBox([generate_key()])
    token = box.encrypt(SECRET)
    assert SECRET not in token and token.isascii()
    assert box.decrypt(token) == SECRET
    assert box.encrypt(SECRET) != token  # a fresh IV each time
    assert box.is_current(token)


def test_rotation_first_key_encrypts_every_key_decrypts() -> None:
    old, new = generate_key(), generate_key()
    under_old = SecretBox([old]).encrypt(SECRET)
    both = SecretBox([new, old])
    assert both.decrypt(under_old) == SECRET
    assert not both.is_current(under_old)
    rotated = both.reencrypt(under_old)
    assert both.is_current(rotated)
    assert SecretBox([new]).decrypt(rotated) == SECRET
    with pytest.raises(SecretError):
        SecretBox([old]).decrypt(rotated)


def test_wrong_key_is_a_clear_error_without_the_secret() -> None:
    token = SecretBox([generate_key()]).encrypt(SECRET)
    with pytest.raises(SecretError) as caught:
        SecretBox([generate_key()]).decrypt(token)
    err = caught.value
    assert err.code == "undecryptable_secret"
    assert "SWITCHBOARD_SECRET_KEY" in err.message and "another key" in err.message
    assert SECRET not in err.message and token not in err.message
    with pytest.raises(SecretError, match="damaged"):
        SecretBox([generate_key()]).decrypt("not a token \u00e9")


@pytest.mark.parametrize("key", ["short", "x" * 44, "\u00e9" * 44])
def test_a_key_that_is_not_a_fernet_key(key: str) -> None:
    with pytest.raises(SecretError) as caught:
        SecretBox([generate_key(), key])
    assert caught.value.code == "invalid_secret_key"
    assert "key 2 of 2" in caught.value.message and "keys secret" in caught.value.message
    assert key not in caught.value.message


def test_repr_shows_no_key() -> None:
    key = generate_key()
    assert key not in repr(SecretBox([key])) and "1 key" in repr(SecretBox([key]))


def test_from_settings(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'db'}"
    assert SecretBox.from_settings(make_settings(url)) is None  # no key: no box
    old, new = generate_key(), generate_key()
    token = SecretBox([old]).encrypt(SECRET)
    box = SecretBox.from_settings(make_settings(url, secret_key=f" {new} , {old} "))
    assert box is not None and box.key_count == 2 and box.decrypt(token) == SECRET
    key_file = tmp_path / "secret.key"
    key_file.write_text(f"{new},{old}\n")
    box = SecretBox.from_settings(make_settings(url, secret_key_file=str(key_file)))
    assert box is not None and box.key_count == 2 and box.decrypt(token) == SECRET


@pytest.mark.parametrize(("content", "says"), [(None, "cannot read"), ("\n", "is empty")])
def test_from_settings_bad_key_file(tmp_path: Path, content: str | None, says: str) -> None:
    key_file = tmp_path / "secret.key"
    if content is not None:
        key_file.write_text(content)
    settings = make_settings(f"sqlite:///{tmp_path / 'db'}", secret_key_file=str(key_file))
    with pytest.raises(SecretError, match=says) as caught:
        SecretBox.from_settings(settings)
    assert "SWITCHBOARD_SECRET_KEY_FILE" in caught.value.message
