"""The FastAPI application: one FinderLedge over one directory, the routes of :mod:`.routes`, JSON errors."""

from __future__ import annotations

import logging
import os
import threading
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..errors import (
    AccessDeniedError,
    ConfigurationError,
    DocumentNotFoundError,
    FilterTooLargeError,
    FinderLedgeError,
    LoadError,
    LockTimeoutError,
)
from ..progress import start_owned
from ..version import package_version
from .answers import make_answerer
from .config import ServerConfig
from .deps import TENANT_FIELD, ServerState
from .jobs import IndexJobs
from .keys import JwtVerifier, KeyStore
from .routes import API_PREFIX, routers
from .routes.page import STATIC_DIR
from .uploads import UnpackLimits, UploadArea

__all__ = ["app_from_environment", "create_app"]

logger = logging.getLogger(__name__)
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
ASGIApp = Callable[
    [Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Awaitable[None]
]
_MULTIPART_SLACK = 256 * 1024  # form fields and part headers around the file
_JSON_LIMIT = 1024 * 1024  # a search or chat request


class BodyLimit:
    """Refuse an upload over the limit (any other request over 1 MiB) with 413 before it is read (by
    Content-Length) or while it is (chunked)."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.upload_limit = limit + _MULTIPART_SLACK

    async def __call__(
        self,
        scope: Scope,
        receive: Callable[[], Awaitable[Message]],
        send: Callable[[Message], Awaitable[None]],
    ) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        uploading = scope.get("path", "").endswith(("/documents", "/documents/upload"))
        limit = self.upload_limit if uploading else _JSON_LIMIT
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            response = JSONResponse({"detail": f"request body larger than the limit of {limit} bytes"}, 413)
            await response(scope, receive, send)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > limit:
                raise HTTPException(413, f"request body larger than the limit of {limit} bytes")
            return message

        await self.app(scope, counted, send)


def _error(status: int, detail: str) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=status)


def _allowed_methods(path: str) -> set[str]:
    """Every method some registered route answers at ``path``; a path some route names exactly (such as
    ``/api/v1/documents/upload``) has that route's methods only, as the OpenAPI schema lists them."""
    exact: set[str] = set()
    methods: set[str] = set()
    for router in routers():
        for route in router.routes:
            if isinstance(route, APIRoute) and route.path_regex.match(path):
                methods |= route.methods or set()
                if route.path == path:
                    exact |= route.methods or set()
    return exact or methods


def _install_error_handlers(app: FastAPI) -> None:
    """FinderLedge's errors as 4xx with their message; anything else a 500 naming a log id, never a trace."""

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        headers = dict(exc.headers or {})
        if exc.status_code == 405:  # name every method of the path, not only the first matching route's
            headers["Allow"] = ", ".join(sorted(_allowed_methods(request.url.path)))
        return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=headers)

    @app.exception_handler(FinderLedgeError)
    async def _library_error(request: Request, exc: FinderLedgeError) -> JSONResponse:
        if isinstance(exc, FilterTooLargeError):
            return _error(400, str(exc))
        if isinstance(exc, AccessDeniedError):  # the caller's access policy refused it
            return _error(403, str(exc))
        if isinstance(exc, ConfigurationError):
            return _error(422, str(exc))
        if isinstance(exc, DocumentNotFoundError):
            return _error(404, str(exc))
        if isinstance(exc, LoadError):
            return _error(400, str(exc))
        if isinstance(exc, LockTimeoutError):
            return _error(503, "the index is busy with another write; try again")
        return await _unexpected(request, exc)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        ref = uuid.uuid4().hex[:12]
        logger.error(
            "request %s %s failed (ref %s)",
            request.method,
            request.url.path,
            ref,
            exc_info=(type(exc), exc, exc.__traceback__),
        )
        return _error(500, f"internal server error (ref {ref}; the server log has the details)")


#: set by ``finderledge serve --workers N`` (N > 1): a worker whose supervisor is gone exits
SUPERVISED_ENV = "FINDERLEDGE_SERVER_SUPERVISED"
#: set by ``finderledge serve``: its worker processes end themselves once stopped (see :data:`EXIT_SECONDS`)
SERVE_ENV = "FINDERLEDGE_SERVER_PROCESS"
#: seconds a stopping worker has, after the server stopped serving, before it exits whatever still runs
EXIT_SECONDS = 5.0
#: seconds uvicorn waits for open requests when asked to stop (``finderledge serve`` sets it)
GRACEFUL_SECONDS = 10


def _exit_soon(seconds: float) -> None:
    """End this process in ``seconds`` unless it ends before (a daemon timer: it never delays an exit)."""
    timer = threading.Timer(seconds, lambda: os._exit(0))
    timer.daemon = True
    timer.start()


def _exit_with_parent() -> Callable[[], None]:
    """Exit when the process that started this worker is gone (a supervisor killed with SIGKILL); returns what
    stops the watch and joins its thread (the app's shutdown; the process's exit does it too)."""
    parent = os.getppid()
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(1.0):
            if os.getppid() != parent:
                logger.warning("the server's supervisor (pid %d) is gone: this worker exits", parent)
                os._exit(0)

    thread = start_owned(watch, "finderledge-parent-watch", stop.set)

    def stop_watch() -> None:
        stop.set()
        if thread is not None:
            thread.join()

    return stop_watch


def create_app(config: ServerConfig | None = None, *, ledger: Any = None, answerer: Any = None) -> FastAPI:
    """The service over ``config.directory`` (or over an open ``ledger``; ``answerer`` overrides ``config.llm``)."""
    config = config or ServerConfig.from_env()
    config.apply_log_level()
    tokens = JwtVerifier(config) if config.jwt_enabled else None  # a bad key fails before the index opens
    if ledger is None:
        from ..facade import FinderLedge

        # each API-key tenant is a partition: its scores never depend on other tenants' documents
        settings = {
            "vector_store": config.vector_store,
            "embedding": config.embedding,
            "partition_key": TENANT_FIELD,
            **config.extra,
        }
        ledger = FinderLedge(
            config.directory, show_progress=False, **{k: v for k, v in settings.items() if v is not None}
        )
        owned = True
    else:
        owned = False
    partition_key = getattr(getattr(ledger, "settings", None), "partition_key", None)
    if partition_key != TENANT_FIELD and (KeyStore(config.server_dir).required or tokens is not None):
        logger.warning(
            "the index's partition_key is %r, not %r: a tenant's scores (BM25 statistics, relevance, "
            "calibration) depend on other tenants' documents; open it with partition_key=%r",
            partition_key,
            TENANT_FIELD,
            TENANT_FIELD,
        )
    uploads = UploadArea(
        config.server_dir / "uploads",
        config.max_upload_bytes,
        config.max_unpacked_bytes,
        UnpackLimits(rows=config.max_rows, pages=config.max_pages),
    )
    state = ServerState(
        config=config,
        ledger=ledger,
        keys=KeyStore(config.server_dir),
        jobs=IndexJobs(config.server_dir / "jobs", uploads.discard),
        uploads=uploads,
        answerer=answerer
        or make_answerer(config.llm, base_url=config.llm_base_url, timeout=config.llm_timeout),
        tokens=tokens,
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        recovered = state.jobs.recover()  # jobs a stopped or killed worker left: failed, their files removed
        if recovered:
            logger.warning(
                "%d upload(s) were being indexed when the server stopped: marked failed", recovered
            )
        stop_watch = _exit_with_parent() if os.environ.get(SUPERVISED_ENV) else None
        try:  # load the model before taking requests, so no caller waits for a cold worker
            ledger.embeddings.embed_query("warm up")
        except Exception as exc:  # noqa: BLE001 - /health reports it
            logger.warning("the embedding model could not be loaded at startup: %s", exc)
        yield
        if os.environ.get(SERVE_ENV):  # a worker of finderledge serve (never an app embedded in a process)
            _exit_soon(EXIT_SECONDS)  # a job's thread (or a stuck request) never keeps a stopped worker alive
        if stop_watch is not None:
            stop_watch()
        state.jobs.close()  # the jobs queued are indexed before the index they write closes
        if owned:
            ledger.close()

    from fastapi_offline import FastAPIOffline  # /docs with Swagger UI served locally, not from a CDN

    app = FastAPIOffline(
        title="FinderLedge",
        version=package_version(),
        lifespan=lifespan,
        description="Hybrid (BM25 + vector) document search with tenants: upload, search, cited chat.",
    )
    app.state.finderledge = state
    _install_error_handlers(app)
    for router in routers():
        app.include_router(router)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    app.add_middleware(BodyLimit, limit=config.max_upload_bytes)
    logger.info(
        "serving %s (api %s; keys %s; JWT %s; llm %s)",
        config.directory,
        API_PREFIX,
        "required" if state.keys.required else "not configured",
        f"{tokens.algorithm} (tenant claim {tokens.claim!r})" if tokens else "off",
        config.llm or "none (extractive)",
    )
    return app


def app_from_environment() -> FastAPI:
    """The app a ``finderledge serve`` worker builds (settings from ``FINDERLEDGE_SERVER_CONFIG``)."""
    return create_app(ServerConfig.from_env())
