"""What every route depends on: the server's state, and who is calling (their tenant's base filter)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import Depends, HTTPException, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from ..access import AccessPolicy
from .keys import TokenError, looks_like_jwt

if TYPE_CHECKING:
    from ..facade import FinderLedge
    from .answers import Answerer
    from .config import ServerConfig
    from .jobs import IndexJobs
    from .keys import JwtVerifier, KeyStore
    from .uploads import UploadArea

__all__ = ["TENANT_FIELD", "Caller", "CallerDep", "ServerState", "StateDep"]

TENANT_FIELD = "tenant"  # the metadata key every write of a keyed caller is tagged with

_bearer = HTTPBearer(
    auto_error=False,
    description="an API key made with 'finderledge keys create', or a JWT when the server has a JWT secret or "
    "public key",
)
_header = APIKeyHeader(name="X-API-Key", auto_error=False, description="the same key, as a header")


@dataclass
class ServerState:
    """One app's parts: settings, the index, the keys, the upload area, the answerer."""

    config: ServerConfig
    ledger: FinderLedge
    keys: KeyStore
    uploads: UploadArea
    answerer: Answerer
    jobs: IndexJobs
    tokens: JwtVerifier | None = None  # JWT bearer tokens (None: API keys only)


@dataclass(frozen=True)
class Caller:
    """Who is calling: a tenant (with keys) or everyone (no keys configured); what they may see and do is
    their :class:`~finderledge.access.AccessPolicy` (``policy``), the one every entry point uses."""

    tenant: str | None

    @property
    def base_filter(self) -> dict[str, Any] | None:
        """The filter every read of this caller is narrowed by (never widened by theirs)."""
        return None if self.tenant is None else {TENANT_FIELD: self.tenant}

    @cached_property
    def policy(self) -> AccessPolicy:
        """The caller's access: their tenant's documents, writes (uploads: the upload area's files, never a
        server path), no folder of the host."""
        label = "this server" if self.tenant is None else f"tenant {self.tenant!r}"
        return AccessPolicy(self.base_filter, writable=True, folders=(), label=label)

    def narrow(self, *filters: dict[str, Any] | None) -> dict[str, Any] | None:
        """The caller's base filter AND-ed with ``filters`` (the request's: their values count against the
        filter limit, the tenant's own clause does not)."""
        return self.policy.narrow(*filters)

    def stamp(self) -> dict[str, Any]:
        """The metadata every write of this caller carries."""
        return self.policy.stamp()


def get_state(request: Request) -> ServerState:
    state: ServerState = request.app.state.finderledge
    return state


StateDep = Annotated[ServerState, Depends(get_state)]


def get_caller(
    state: StateDep,
    bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    header: Annotated[str | None, Depends(_header)],
) -> Caller:
    """The caller's tenant from their key or JWT; 401 when keys or JWTs are configured and none (or a revoked
    key, or an expired or invalid token) is given."""
    if not state.keys.required and state.tokens is None:
        return Caller(None)
    secret = bearer.credentials if bearer is not None else header
    if secret and bearer is not None and state.tokens is not None and looks_like_jwt(secret):
        try:
            return Caller(state.tokens.tenant(secret))
        except TokenError as exc:
            raise HTTPException(
                401,
                f"bearer token refused: {exc}",
                headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
            ) from None
    key = state.keys.authenticate(secret) if secret else None
    if key is None:
        accepted = "an API key or a JWT" if state.tokens is not None else "a valid API key"
        raise HTTPException(
            401,
            f"{accepted} is required (Authorization: Bearer <key> or X-API-Key)",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return Caller(key.tenant)


CallerDep = Annotated[Caller, Depends(get_caller)]
