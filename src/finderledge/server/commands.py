"""``finderledge serve`` and ``finderledge keys create|revoke|list``: the service's command-line side."""

from __future__ import annotations

import argparse
import errno
import ipaddress
import os
import socket
import sys
from pathlib import Path
from typing import Any

from ..cli.search_options import llm_options
from ..errors import ConfigurationError
from ..vector_stores import backend_names

__all__ = ["COMMANDS", "EXIT_SERVER_FAILED", "add_commands"]

#: ``finderledge serve``'s exit code when the server stopped on an error of its own after the checks passed
#: (uvicorn's startup failure, e.g. the port taken between the check and the start; its log says why)
EXIT_SERVER_FAILED = 3


def add_commands(sub: Any, index_dir_default: str, output_options: Any) -> None:
    """Add ``serve`` and ``keys`` to the ``finderledge`` parser."""
    p = sub.add_parser(
        "serve",
        help="run the HTTP service (API, web page) over an index",
        description="Run the HTTP API (/api/v1, OpenAPI docs at /docs) and the web page (/) over "
        "DIR. Without API keys it only listens on a loopback address.",
    )
    p.add_argument(
        "dir",
        nargs="?",
        default=index_dir_default,
        help=f"index directory (default: {index_dir_default}; created when missing)",
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--workers", type=int, default=1, help="worker processes (each opens the index)")
    llm_options(p, "the chat answers")
    p.add_argument("--max-upload-mb", type=float, default=50.0)
    p.add_argument(
        "--max-unpacked-mb", type=float, default=25.0, help="what a DOCX may unpack to (more: 413)"
    )
    p.add_argument(
        "--max-rows", type=int, default=50_000, help="CSV/JSONL rows or JSON items per upload (more: 413)"
    )
    p.add_argument("--max-pages", type=int, default=2_000, help="pages per PDF upload (more: 413)")
    p.add_argument(
        "--max-chunks",
        type=int,
        default=50_000,
        help="chunks one upload may split into (more: 413, found while splitting, before embedding)",
    )
    p.add_argument(
        "--index-wait",
        type=float,
        default=3.0,
        help="seconds an upload waits for its indexing before answering 201 'processing' (then indexed in "
        "the background)",
    )
    p.add_argument("--embedding", default=None, metavar="MODEL")
    p.add_argument(
        "--vector-store",
        choices=backend_names(),
        default=None,
        help="the vector backend of a new index directory (registered backends)",
    )
    p.add_argument(
        "--profile",
        choices=["document-search"],
        default=None,
        help="document-search: the document-search design's service (chunks of 1000/200 characters, top_k 5, "
        "Qdrant, and its variables DATABASE_URL, QDRANT_URL, QDRANT_COLLECTION, LOG_LEVEL, OPENAI_API_KEY)",
    )
    p.add_argument(
        "--jwt-public-key",
        default=os.environ.get("FINDERLEDGE_JWT_PUBLIC_KEY"),
        metavar="FILE",
        help="accept RS256 JWT bearer tokens signed for this PEM public key (default "
        "$FINDERLEDGE_JWT_PUBLIC_KEY); an HS256 secret is read from $FINDERLEDGE_JWT_SECRET only (never a flag: "
        "it would show in the process list)",
    )
    p.add_argument(
        "--jwt-claim",
        default=os.environ.get("FINDERLEDGE_JWT_CLAIM", "sub"),
        help="the JWT claim naming the tenant (default sub)",
    )
    p.add_argument(
        "--jwt-audience",
        default=os.environ.get("FINDERLEDGE_JWT_AUDIENCE"),
        help="the 'aud' a bearer token must carry (env FINDERLEDGE_JWT_AUDIENCE); a token with another is refused",
    )
    p.add_argument(
        "--jwt-issuer",
        default=os.environ.get("FINDERLEDGE_JWT_ISSUER"),
        help="the 'iss' a bearer token must carry (env FINDERLEDGE_JWT_ISSUER)",
    )
    p.add_argument(
        "--allow-no-auth",
        action="store_true",
        help="listen on a non-loopback address although no API key exists (everyone sees everything)",
    )
    output_options(p)
    k = sub.add_parser("keys", help="create, revoke or list API keys (each maps to a tenant)")
    ksub = k.add_subparsers(dest="keys_command", required=True, metavar="ACTION")
    for name, summary in (
        ("create", "create a key for a tenant (printed once)"),
        ("revoke", "revoke a key by id"),
        ("list", "list keys (ids, tenants; never the keys)"),
    ):
        q = ksub.add_parser(name, help=summary, description=summary[0].upper() + summary[1:] + ".")
        q.add_argument("-d", "--dir", default=index_dir_default, help="index directory")
        if name == "create":
            q.add_argument("--tenant", required=True)
            q.add_argument("--name", default=None, help="a note, e.g. who holds the key")
        if name == "revoke":
            q.add_argument("key_id")
        q.add_argument("--json", action="store_true", help="print JSON on stdout")
        output_options(q)


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_port(host: str, port: int) -> None:
    """Refuse a port another process listens on (or an address this machine lacks), before the server claims
    to serve: binding as uvicorn does, then letting go (a :class:`ConfigurationError`, exit 2)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ConfigurationError(f"--host {host}: not an address of this machine ({exc.strerror})") from None
    family, _, _, _, address = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        # as uvicorn binds: a socket of a closed server (TIME_WAIT) is no owner
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise ConfigurationError(
                    f"--port {port}: {host}:{port} is already in use by another process (another "
                    "'finderledge serve'?); stop it or choose another port with --port"
                ) from None
            raise ConfigurationError(
                f"--host {host} --port {port}: cannot listen there ({exc.strerror})"
            ) from None


def cmd_serve(args: argparse.Namespace) -> int:
    """Run uvicorn with ``--workers`` processes, each building the app from the same settings."""
    from .config import ServerConfig
    from .keys import KeyStore

    given: dict[str, Any] = {
        "llm": args.llm,
        "llm_base_url": args.llm_base_url,
        "max_upload_mb": args.max_upload_mb,
        "max_unpacked_mb": args.max_unpacked_mb,
        "max_rows": args.max_rows,
        "max_pages": args.max_pages,
        "max_chunks": args.max_chunks,
        "index_wait": args.index_wait,
        "embedding": args.embedding,
        "vector_store": args.vector_store,
    }
    tokens: dict[str, Any] = {  # JWT bearer tokens: the secret from the environment only (never a flag)
        "jwt_secret": os.environ.get("FINDERLEDGE_JWT_SECRET") or None,
        "jwt_public_key": args.jwt_public_key or None,
        "jwt_claim": args.jwt_claim,
        "jwt_audience": args.jwt_audience,
        "jwt_issuer": args.jwt_issuer,
    }
    if getattr(args, "profile", None) == "document-search":  # options given on the command line win
        said = {k: v for k, v in given.items() if v is not None}
        config = ServerConfig.document_search(Path(args.dir), **said, **tokens)
    else:
        config = ServerConfig(directory=Path(args.dir), **given, **tokens)
    if args.workers < 1:
        raise ConfigurationError(f"--workers: expected 1 or more, got {args.workers}")
    if (
        not _loopback(args.host)
        and not KeyStore(config.server_dir).required
        and not config.jwt_enabled
        and not args.allow_no_auth
    ):
        raise ConfigurationError(
            f"--host {args.host}: no API key exists (and no JWT secret or public key is set), so the server listens on a loopback "
            "address only; create one with 'finderledge keys create --tenant NAME' "
            "(or pass --allow-no-auth)"
        )
    try:
        import uvicorn

        # fail here, with the extra's name, when fastapi is missing
        from .app import GRACEFUL_SECONDS, SERVE_ENV, SUPERVISED_ENV
    except ImportError as exc:
        raise ConfigurationError(
            f'the server needs its extra ({exc.name} is missing): pip install "finderledge[server]"'
        ) from None
    check_port(args.host, args.port)
    os.environ.update(config.to_env())
    os.environ[SERVE_ENV] = "1"
    if args.workers > 1:
        os.environ[SUPERVISED_ENV] = "1"
    sys.stderr.write(
        f"finderledge: serving {config.directory} on http://{args.host}:{args.port} "
        f"({args.workers} worker(s); API docs at /docs)\n"
    )
    try:
        uvicorn.run(
            "finderledge.server.app:app_from_environment",
            factory=True,
            host=args.host,
            port=args.port,
            workers=args.workers,
            log_level="warning" if args.verbosity < 1 else "info",
            timeout_graceful_shutdown=GRACEFUL_SECONDS,  # then every worker exits within EXIT_SECONDS more
        )
    except SystemExit as exc:  # uvicorn exits 1 or 3 when it cannot start: one documented code, and why
        if exc.code in (None, 0):
            return 0
        sys.stderr.write(
            f"finderledge serve: error: the server stopped on an error (uvicorn exit {exc.code}; "
            "the lines above say why)\n"
        )
        return EXIT_SERVER_FAILED
    return 0


def cmd_keys(args: argparse.Namespace) -> int:
    """Create, revoke or list API keys of ``--dir``."""
    import json

    from .config import SERVER_DIR
    from .keys import KeyStore

    store = KeyStore(Path(args.dir).expanduser() / SERVER_DIR)
    if args.keys_command == "create":
        key, secret = store.create(args.tenant, args.name)
        data: Any = {"id": key.id, "tenant": key.tenant, "key": secret}
        text = f"{secret}\n" if not args.json else ""
        sys.stderr.write(f"key {key.id} for tenant {key.tenant!r} created; it is shown only now\n")
    elif args.keys_command == "revoke":
        key = store.revoke(args.key_id)
        data = {"id": key.id, "tenant": key.tenant, "revoked_at": key.revoked_at}
        text = f"key {key.id} (tenant {key.tenant}) revoked at {key.revoked_at}\n"
    else:
        keys = store.keys()
        data = [
            {
                "id": k.id,
                "tenant": k.tenant,
                "name": k.name,
                "created_at": k.created_at,
                "revoked_at": k.revoked_at,
            }
            for k in keys
        ]
        text = (
            "".join(
                f"{k.id}  {k.tenant}  created {k.created_at}"
                f"{'  REVOKED ' + k.revoked_at if k.revoked_at else ''}{'  ' + k.name if k.name else ''}\n"
                for k in keys
            )
            or "no keys\n"
        )
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n" if args.json else text)
    return 0


COMMANDS = {"serve": cmd_serve, "keys": cmd_keys}
