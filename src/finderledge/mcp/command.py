"""``finderledge mcp DIR``: the command-line side of the Model Context Protocol server
(:mod:`finderledge.mcp.server`, imported only when the command runs so the CLI starts fast)."""

from __future__ import annotations

import argparse
import functools
import json
import logging
from pathlib import Path
from typing import Any

from ..cli.search_options import llm_options
from ..errors import ConfigurationError
from ..server.config import ServerConfig

__all__ = ["COMMANDS", "add_command"]

logger = logging.getLogger(__name__)
INSTALL_HINT = 'pip install "finderledge[mcp]"'


def add_command(sub: Any, index_dir_default: str, output_options: Any) -> None:
    """Add ``mcp`` to the ``finderledge`` parser."""
    p = sub.add_parser(
        "mcp",
        help="serve an index to agents over the Model Context Protocol (stdio)",
        description="Run a Model Context Protocol server over stdio exposing search, get_context, answer, "
        f"add and list on DIR (needs {INSTALL_HINT}).  Read-only unless --allow-writes; add(path=...) reads "
        "files only under --allow-folder folders.",
    )
    p.add_argument(
        "dir", nargs="?", default=index_dir_default, help=f"index directory (default: {index_dir_default})"
    )
    p.add_argument(
        "--filter",
        default=None,
        metavar="JSON",
        help='base filter applied to every tool, e.g. \'{"tenant": "a"}\' (add stamps its fields)',
    )
    p.add_argument(
        "--allow-writes",
        action="store_true",
        help="let the add tool store documents (default: read-only; with --filter, inside its scope only)",
    )
    p.add_argument(
        "--allow-folder",
        action="append",
        default=[],
        metavar="DIR",
        help="a folder add(path=...) may read files from (repeatable; default: none, so no files are read); "
        "symbolic links leading out of it are refused",
    )
    p.add_argument(
        "--max-file-mb",
        type=float,
        default=ServerConfig.max_upload_mb,
        metavar="MB",
        help=f"the largest file add(path=...) reads (default: {ServerConfig.max_upload_mb:g}, the server's "
        "upload limit)",
    )
    p.add_argument(
        "--embedding",
        default=None,
        metavar="MODEL",
        help="the model the index is built with (if not the default)",
    )
    llm_options(p, "the answer tool's answers")
    output_options(p)


def _run(args: argparse.Namespace) -> int:
    """``finderledge mcp``: open the index, then serve it over stdio until the client closes."""
    from .server import build_server, server_class

    server_class()  # a missing SDK fails before the index is opened
    base = None
    if args.filter:
        try:
            base = json.loads(args.filter)
        except json.JSONDecodeError as exc:
            raise ConfigurationError(
                f"--filter: expected a JSON object, got {args.filter!r} ({exc})"
            ) from None
        if not isinstance(base, dict):
            raise ConfigurationError(f"--filter: expected a JSON object, got {args.filter!r}")
    if not 0 < args.max_file_mb < float("inf"):
        raise ConfigurationError(f"--max-file-mb: expected a positive number, got {args.max_file_mb!r}")
    from ..access import AccessPolicy
    from ..facade import FinderLedge
    from ..rag.llms import make_chat_model
    from ..server.uploads import UnpackLimits, unpack_limit_problem

    policy = AccessPolicy(  # what the agent may see and do, checked before the index is opened
        base,
        writable=args.allow_writes,
        folders=args.allow_folder,
        max_file_bytes=int(args.max_file_mb * 1024 * 1024),
        max_chunks=ServerConfig.max_chunks,
        label="this MCP server",
        file_check=functools.partial(
            unpack_limit_problem, limits=UnpackLimits()
        ),  # the server's upload limits
    )
    if args.allow_folder and not args.allow_writes:
        logger.warning("--allow-folder has no effect without --allow-writes: the server is read-only")
    llm = make_chat_model(args.llm, base_url=args.llm_base_url) if args.llm else None
    with FinderLedge(Path(args.dir).expanduser(), embedding=args.embedding, show_progress=False) as ledger:
        build_server(ledger, llm=llm, policy=policy).run("stdio")
    return 0


COMMANDS = {"mcp": _run}
