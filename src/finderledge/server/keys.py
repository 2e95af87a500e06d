"""API keys: each maps to a tenant; only a SHA-256 of each key is stored (``<index>/server/keys.json``).

Keys are 256-bit random secrets, so a plain SHA-256 is enough to make the file useless to a reader (no
password-style stretching needed).  Once the file holds any key (revoked ones included) every API call
needs a valid key: revoking the last key never opens the server.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from filelock import FileLock

from ..errors import ConfigurationError, DocumentNotFoundError

if TYPE_CHECKING:
    from .config import ServerConfig

__all__ = ["TENANT_PATTERN", "ApiKey", "JwtVerifier", "KeyStore", "TokenError"]

KEYS_FILE = "keys.json"
KEY_PREFIX = "flk_"
TENANT_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,127}$")


@dataclass(frozen=True)
class ApiKey:
    """What is stored about a key: never the key itself."""

    id: str
    tenant: str
    sha256: str
    created_at: str
    revoked_at: str | None = None
    name: str | None = None


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class KeyStore:
    """The keys of one server directory; re-read when the file changes (a key revoked by the CLI stops working
    at the next request of every worker)."""

    def __init__(self, server_dir: str | os.PathLike[str]) -> None:
        self.path = Path(server_dir) / KEYS_FILE
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._keys: list[ApiKey] = []

    def _load(self) -> list[ApiKey]:
        with self._lock:
            try:
                st = self.path.stat()
            except FileNotFoundError:
                self._stamp, self._keys = None, []
                return []
            stamp = (st.st_mtime_ns, st.st_size)
            if stamp != self._stamp:
                data = json.loads(self.path.read_text(encoding="utf-8"))
                self._keys = [ApiKey(**item) for item in data.get("keys", [])]
                self._stamp = stamp
            return list(self._keys)

    @property
    def required(self) -> bool:
        """Whether API calls need a key: the key file exists (even when every key in it is revoked)."""
        return self.path.exists()

    def keys(self) -> list[ApiKey]:
        return self._load()

    def authenticate(self, secret: str) -> ApiKey | None:
        """The live key ``secret`` is, or ``None``."""
        digest = _digest(secret)
        found = None
        for key in self._load():  # compare with every key: the time taken says nothing about which matched
            if hmac.compare_digest(key.sha256, digest) and key.revoked_at is None:
                found = key
        return found

    def create(self, tenant: str, name: str | None = None) -> tuple[ApiKey, str]:
        """A new key for ``tenant``; returns it with the secret (shown once, never stored)."""
        if not isinstance(tenant, str) or not TENANT_PATTERN.match(tenant):
            raise ConfigurationError(
                f"tenant: expected 1-128 letters, digits or _.@- (starting with a letter or "
                f"digit), got {tenant!r}"
            )
        secret = KEY_PREFIX + secrets.token_urlsafe(32)
        key = ApiKey(
            id=secrets.token_hex(6), tenant=tenant, sha256=_digest(secret), created_at=_now(), name=name
        )
        with self._file_lock():
            self._write([*self._load(), key])
        return key, secret

    def revoke(self, key_id: str) -> ApiKey:
        """Revoke a key by id (it stays listed, marked revoked)."""
        with self._file_lock():
            keys = self._load()
            for i, key in enumerate(keys):
                if key.id == key_id:
                    if key.revoked_at is None:
                        keys[i] = ApiKey(**{**key.__dict__, "revoked_at": _now()})
                        self._write(keys)
                    return keys[i]
        raise DocumentNotFoundError(f"no API key with id {key_id!r} in {self.path}")

    def _file_lock(self) -> FileLock:
        """Two CLI calls changing the keys at once: one waits (no key is lost)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        return FileLock(str(self.path) + ".lock", timeout=30)

    def _write(self, keys: list[ApiKey]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data: dict[str, Any] = {"keys": [k.__dict__ for k in keys]}
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".keys-")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(data, fh, indent=1)
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


class TokenError(Exception):
    """A bearer token that is a JWT but not a valid one (bad signature, expired, wrong audience, no tenant)."""


def looks_like_jwt(token: str) -> bool:
    """Three base64url parts (an API key has none of the dots)."""
    parts = token.split(".")
    return len(parts) == 3 and all(re.fullmatch(r"[A-Za-z0-9_-]+", p) for p in parts[:2])


class JwtVerifier:
    """Checks JWT bearer tokens: an HS256 secret or an RS256 public key, ``exp`` required, ``aud``/``iss``
    when configured; the tenant is the configured claim (default ``sub``)."""

    def __init__(self, config: ServerConfig) -> None:
        try:
            import jwt
        except ImportError as exc:
            raise ConfigurationError(
                'server setting jwt_secret/jwt_public_key: JWTs need PyJWT: pip install "finderledge[server]"'
            ) from exc
        self._jwt = jwt
        if config.jwt_secret is not None:
            self.key: Any = config.jwt_secret
            self.algorithm = "HS256"
        elif config.jwt_public_key is not None:
            self.key = self._public_key(config.jwt_public_key)
            self.algorithm = "RS256"
        else:
            raise ConfigurationError("JwtVerifier: the server has no jwt_secret or jwt_public_key")
        self.claim = config.jwt_claim
        self.audience = config.jwt_audience
        self.issuer = config.jwt_issuer

    @staticmethod
    def _public_key(value: str) -> Any:
        from cryptography.hazmat.primitives.serialization import load_pem_public_key

        text = value if "-----BEGIN" in value else _read_key_file(value)
        try:
            return load_pem_public_key(text.encode("ascii"))
        except ValueError as exc:
            raise ConfigurationError(
                f"server setting jwt_public_key: expected an RSA public key in PEM form ({exc})"
            ) from None

    def tenant(self, token: str) -> str:
        """The tenant ``token`` names; :class:`TokenError` saying why when it is not valid."""
        try:
            claims = self._jwt.decode(
                token,
                self.key,
                algorithms=[self.algorithm],  # never "none", never the other family
                audience=self.audience,
                issuer=self.issuer,
                options={"require": ["exp"]},
            )
        except self._jwt.ExpiredSignatureError:
            raise TokenError("the token has expired") from None
        except self._jwt.InvalidTokenError as exc:
            raise TokenError(f"the token is not valid ({exc})") from None
        tenant = claims.get(self.claim)
        if not isinstance(tenant, str) or not TENANT_PATTERN.match(tenant):
            raise TokenError(f"the token's {self.claim!r} claim does not name a tenant")
        return tenant


def _read_key_file(path: str) -> str:
    try:
        return Path(path).expanduser().read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigurationError(
            f"server setting jwt_public_key: {path!r} is neither a PEM key nor a readable key file ({exc})"
        ) from None
