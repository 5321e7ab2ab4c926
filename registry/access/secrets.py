"""Secrets at rest: :class:`SecretBox` encrypts the outbound credentials the registry stores.

Fernet (AES-128-CBC with HMAC-SHA256, from ``cryptography``) under the key of
``SWITCHBOARD_SECRET_KEY`` or the file ``SWITCHBOARD_SECRET_KEY_FILE``. Several keys,
comma-separated, rotate: the first encrypts, every one decrypts (``MultiFernet``). Errors say
which setting to fix and never show a key or a secret.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from registry.errors import RegistryError
from registry.settings import Settings

__all__ = ["KEY_SETTINGS", "SecretBox", "SecretError", "generate_key"]

KEY_SETTINGS = "SWITCHBOARD_SECRET_KEY (or SWITCHBOARD_SECRET_KEY_FILE)"
_MAKE_ONE = "`switchboard keys secret` makes one"


class SecretError(RegistryError):
    """A secret key that cannot be used, or a secret it cannot decrypt."""

    status = 409
    code = "secret_key"


def generate_key() -> str:
    """A new random Fernet key (32 bytes, url-safe base64): a value for SWITCHBOARD_SECRET_KEY."""
    return Fernet.generate_key().decode("ascii")


class SecretBox:
    """Encrypts and decrypts short secrets (header values, OAuth2 client secrets).

    ``keys`` are Fernet keys, newest first: :meth:`encrypt` uses the first, :meth:`decrypt`
    tries each. The box never shows its keys (``repr`` included).
    """

    def __init__(self, keys: Sequence[str]) -> None:
        if not keys:
            raise SecretError(f"no secret key given: set {KEY_SETTINGS}; {_MAKE_ONE}")
        fernets = []
        for index, key in enumerate(keys):
            try:
                fernets.append(Fernet(key.strip().encode("ascii")))
            except (ValueError, UnicodeEncodeError):
                where = f"key {index + 1} of {len(keys)}" if len(keys) > 1 else "the key"
                raise SecretError(
                    f"{KEY_SETTINGS}: {where} is not a Fernet key (32 random bytes in url-safe "
                    f"base64, 44 characters); {_MAKE_ONE}",
                    code="invalid_secret_key",
                ) from None
        self._primary = fernets[0]
        self._all = MultiFernet(fernets)
        self.key_count = len(fernets)

    def __repr__(self) -> str:
        return f"SecretBox(<{self.key_count} key(s)>)"

    @classmethod
    def from_settings(cls, settings: Settings) -> SecretBox | None:
        """The box of ``settings.secret_key`` or the file ``settings.secret_key_file``
        (whitespace stripped; several keys comma-separated); None when neither is set."""
        text = settings.secret_key
        if settings.secret_key_file:
            path = Path(settings.secret_key_file)
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "unreadable"
                raise SecretError(
                    f"SWITCHBOARD_SECRET_KEY_FILE {path}: cannot read it ({reason.lower()})",
                    code="invalid_secret_key",
                ) from None
        if text is None or not text.strip():
            if settings.secret_key_file:
                raise SecretError(
                    f"SWITCHBOARD_SECRET_KEY_FILE {settings.secret_key_file} is empty; {_MAKE_ONE}",
                    code="invalid_secret_key",
                )
            return None
        return cls([key for key in (part.strip() for part in text.split(",")) if key])

    def encrypt(self, secret: str) -> str:
        """``secret`` encrypted with the first key: a Fernet token (ASCII)."""
        return self._primary.encrypt(secret.encode("utf-8")).decode("ascii")

    def decrypt(self, token: str) -> str:
        """The secret in ``token``; :class:`SecretError` when no key opens it."""
        try:
            return self._all.decrypt(token.encode("ascii")).decode("utf-8")
        except (InvalidToken, UnicodeError):
            raise SecretError(
                f"a stored secret cannot be decrypted with the configured {KEY_SETTINGS}: it was "
                "encrypted with another key (keep the old key after the new one, comma-separated, "
                "until every secret is re-encrypted) or the stored value is damaged",
                code="undecryptable_secret",
            ) from None

    def is_current(self, token: str) -> bool:
        """Whether ``token`` is encrypted with the first key (no re-encryption needed)."""
        try:
            self._primary.decrypt(token.encode("ascii"))
        except (InvalidToken, UnicodeError):
            return False
        return True

    def reencrypt(self, token: str) -> str:
        """``token``'s secret encrypted with the first key (key rotation)."""
        return self.encrypt(self.decrypt(token))
