"""The service's routes, one module per group; each module exposes ``router`` (a FastAPI ``APIRouter``).

:data:`ROUTE_MODULES` is the registry :func:`finderledge.server.create_app` mounts, in order; the contract
tests (``tests/integration/test_server_tenants.py``) check every route of every module: it needs a key when keys are
configured (unless :data:`PUBLIC_PATHS` lists it), answers errors as JSON without a stack trace, and is
described in the OpenAPI schema.
"""

from __future__ import annotations

import importlib

from fastapi import APIRouter

__all__ = ["API_PREFIX", "PUBLIC_PATHS", "ROUTE_MODULES", "routers"]

API_PREFIX = "/api/v1"
ROUTE_MODULES = ("documents", "search", "chat", "system", "page")
PUBLIC_PATHS = frozenset({"/", "/health", API_PREFIX + "/health", API_PREFIX + "/version"})


def routers() -> list[APIRouter]:
    """Every registered module's router."""
    return [importlib.import_module(f"{__name__}.{name}").router for name in ROUTE_MODULES]
