"""FinderLedge as an HTTP service (``pip install "finderledge[server]"``, then ``finderledge serve DIR``).

:func:`create_app` builds the FastAPI app over one index directory: documents (upload/list/detail/delete),
search, chat (also streamed) and health under ``/api/v1``, a web page at ``/``, OpenAPI docs at ``/docs``.
API keys (``finderledge keys create --tenant NAME``) map callers to tenants whose documents are kept apart.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError
from .config import ServerConfig

if TYPE_CHECKING:
    from fastapi import FastAPI

__all__ = ["ServerConfig", "create_app"]


def create_app(config: ServerConfig | None = None, **kwargs: Any) -> FastAPI:
    """The FastAPI app over ``config.directory`` (see :func:`finderledge.server.app.create_app`)."""
    try:
        from .app import create_app as build
    except ImportError as exc:  # fastapi, uvicorn or python-multipart missing
        raise ConfigurationError(
            f'the server needs its extra ({exc.name} is missing): pip install "finderledge[server]"'
        ) from None
    return build(config, **kwargs)
