"""The ``finderledge`` command line: add, search, context, answer, remove, list, stats, gc, check, reindex, eval,
serve and keys.

Exit codes: 0 success; 1 nothing found (search/context/answer without results, none left by
--score-threshold, remove of an unknown id) or damage found (check);
2 bad usage or input (a missing index, path or option value, a missing extra, serve's port in use), or any
other failure; 3 serve's server stopped on an error after starting, or (check) the disk is full, so part of
the check or repair could not run (no damage; free space and run it again); 130 interrupted.
A failure is one line on stderr (``--debug`` shows the traceback instead); warnings are one line each
(``-v`` adds FinderLedge's progress details, ``-q`` leaves errors only).  ``--json`` prints
machine-readable output on stdout.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, NoReturn

from ..config import CHUNK_UNITS, FUSIONS, SEARCH_MODES, VECTOR_INDEXES, Settings
from ..errors import DocumentNotFoundError, FinderLedgeError, IncompatibleIndexError
from ..filters import and_filters
from ..mcp.command import COMMANDS as MCP_COMMANDS
from ..mcp.command import add_command as add_mcp_command
from ..metadata import info_of, source_of
from ..server.commands import COMMANDS as SERVER_COMMANDS
from ..server.commands import add_commands
from ..vector_stores import backend_names
from ..version import package_version
from .logs import PROG, stderr_logging
from .search_options import (
    ANSWER_SUMMARY,
    answer_options,
    metadata_option,
    parse_metadata,
    search_kwargs,
    search_options,
)

__all__ = ["build_parser", "main", "package_version"]

DEFAULT_DIR = ".finderledge"
EXIT_NOT_FOUND = 1
EXIT_DISK_FULL = 3  # check: the disk is full, not everything could be checked or repaired
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130
ADD_SUMMARY = "add files or folders (or literal text with --text)"


class UsageError(Exception):
    """Bad input the command itself detects (exit 2)."""


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line on stderr (exit 2)."""

    def error(self, message: str) -> NoReturn:
        """Print ``PROG: error: message (see 'PROG --help')`` and exit 2."""
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def _default_dir() -> str:
    """$FINDERLEDGE_PERSIST_DIRECTORY, else ``.finderledge``."""
    return os.environ.get("FINDERLEDGE_PERSIST_DIRECTORY") or DEFAULT_DIR


# -- the parser -----------------------------------------------------------------------------------
def _output_options(parser: argparse.ArgumentParser, *, top: bool = False) -> None:
    """-v/-q/--debug, accepted before the subcommand and after it."""
    keep: dict[str, Any] = (
        {} if top else {"default": argparse.SUPPRESS}
    )  # a subcommand's default must not undo the top's
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "-v",
        "--verbose",
        dest="verbosity",
        action="store_const",
        const=1,
        help="also show FinderLedge's progress details on stderr",
        **keep,
    )
    group.add_argument(
        "-q", "--quiet", dest="verbosity", action="store_const", const=-1, help="show errors only", **keep
    )
    parser.add_argument(
        "--debug", action="store_true", help="show the full traceback of a failure (and debug logs)", **keep
    )


def _index_options(parser: argparse.ArgumentParser) -> None:
    """--dir, --embedding, --json and the output options of a command that opens an index."""
    parser.add_argument(
        "-d",
        "--dir",
        default=_default_dir(),
        help=f"persist directory (default: $FINDERLEDGE_PERSIST_DIRECTORY or {DEFAULT_DIR})",
    )
    parser.add_argument(
        "--embedding",
        default=None,
        metavar="MODEL",
        help="the model the index is built with, e.g. sentence-transformers:/path/to/model",
    )
    parser.add_argument("--json", action="store_true", help="print JSON on stdout")
    _output_options(parser)


def _vector_store_option(parser: argparse.ArgumentParser, text: str) -> None:
    """``--vector-store``, offering every backend the registry knows (built in or registered)."""
    parser.add_argument("--vector-store", choices=backend_names(), default=None, help=text)


def _add_add(sub: Any) -> None:
    """The ``add`` subcommand."""
    p = sub.add_parser("add", help=ADD_SUMMARY, description=ADD_SUMMARY[0].upper() + ADD_SUMMARY[1:] + ".")
    _index_options(p)
    p.add_argument("paths", nargs="*", metavar="PATH", help="files or folders (a folder is read recursively)")
    p.add_argument(
        "--text", action="append", metavar="TEXT", help="add TEXT itself as a document (repeatable)"
    )
    metadata_option(p)
    p.add_argument("--include", action="append", help="glob of files to include (repeatable)")
    p.add_argument("--exclude", action="append", help="glob of files to exclude (repeatable)")
    p.add_argument(
        "--on-error",
        choices=["skip", "raise"],
        default="skip",
        help="a file that cannot be read: skip it and report it (default), or stop with an error",
    )
    _vector_store_option(
        p,
        "vector store of a new index (default faiss; chroma needs finderledge[chroma], pgvector "
        "FINDERLEDGE_DATABASE_URL); on an existing index, switch the index to this vector store (rebuilt from the "
        "ledger)",
    )
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.add_argument(
        "--prune", action="store_true", help="remove documents whose files no longer exist under the folders"
    )
    p.add_argument("--follow-symlinks", action="store_true", help="follow symlinks found inside the folders")


def _add_search(sub: Any, name: str, summary: str) -> None:
    """The ``search``, ``context`` or ``answer`` subcommand."""
    p = sub.add_parser(name, help=summary, description=summary[0].upper() + summary[1:] + ".")
    _index_options(p)
    p.add_argument("query", help="the question or keywords to search for")
    p.add_argument("-k", type=int, default=None, help="number of results")
    p.add_argument(
        "-m",
        "--mode",
        choices=list(SEARCH_MODES),
        default=None,
        help="both legs fused (default), the embedding leg only, or the BM25 leg only",
    )
    p.add_argument("--filter", default=None, help='metadata filter as JSON, e.g. \'{"lang": "ja"}\'')
    search_options(p)
    if name == "answer":
        answer_options(p)
        return
    p.add_argument("--parents", action="store_true", help="return parent documents instead of chunks")
    if name == "context":
        p.add_argument(
            "--max-chars",
            type=int,
            default=None,
            help="cap the context at this many characters (passages that would overflow are left out)",
        )


def _add_small_commands(sub: Any) -> None:
    """The ``remove``, ``list``, ``stats`` and ``gc`` subcommands."""
    p = sub.add_parser("remove", help="remove documents by parent id, source path or document id")
    _index_options(p)
    p.add_argument(
        "ids",
        nargs="+",
        metavar="ID",
        help="a parent id (from 'list'), a source path, or a document id given with add_document",
    )
    p = sub.add_parser("list", help="list stored documents")
    _index_options(p)
    p.add_argument("--source", default=None, help="only the documents of this source path")
    p.add_argument(
        "--filter", default=None, help='metadata filter as JSON, e.g. \'{"document_id": "doc-42"}\''
    )
    p.add_argument("--offset", type=int, default=0, help="skip this many documents first")
    p.add_argument("--limit", type=int, default=None, help="list at most this many documents (default: all)")
    _index_options(sub.add_parser("stats", help="counts and settings"))
    _index_options(sub.add_parser("gc", help="drop cached vectors no stored chunk uses"))
    p = sub.add_parser(
        "check",
        help="verify the ledger and each index against it (exit 0 clean, 1 damage found)",
        description=(
            "Verify the ledger (every page, every row, parents and chunks) and each index against it (ids, "
            "checksums, vectors), and report what is wrong in plain words; nothing is changed unless "
            "--repair is given (it rebuilds indexes from the vectors in the ledger: no embedding model is "
            "loaded).  Exit codes: 0 no damage, 1 damage found (repaired or not), 2 bad usage, 3 the disk is "
            "full, so part of the check or repair could not run (free some space and run it again)."
        ),
    )
    p.add_argument(
        "--repair", action="store_true", help="rebuild what the ledger can rebuild and say what it cannot"
    )
    _index_options(p)
    summary = "split every stored document again with new chunk settings, or switch the vector store"
    p = sub.add_parser(
        "reindex",
        help=summary,
        description=(
            summary[0].upper()
            + summary[1:]
            + ". The new settings are recorded with the index; chunk texts already "
            "embedded keep their vectors. Without options the documents are split again with the recorded settings."
        ),
    )
    _index_options(p)
    p.add_argument(
        "--chunk-size",
        type=int,
        default=None,
        metavar="N",
        help="chunk length, in --chunk-unit (default: the recorded one)",
    )
    p.add_argument(
        "--chunk-overlap",
        type=int,
        default=None,
        metavar="N",
        help="overlap between consecutive chunks (default: the recorded one)",
    )
    p.add_argument(
        "--chunk-unit",
        choices=list(CHUNK_UNITS),
        default=None,
        help="what the lengths count: weighted (a CJK character counts 3) or chars (default: recorded)",
    )
    p.add_argument(
        "--chunk-context",
        type=_on_off,
        default=None,
        metavar="on|off",
        help="embed and BM25-index each chunk with its document's title and heading path (default: recorded)",
    )
    _vector_store_option(p, "switch the index to this vector store (rebuilt from the ledger)")
    p.add_argument(
        "--vector-index",
        choices=list(VECTOR_INDEXES),
        default=None,
        help="switch the FAISS store's search structure (docs/scaling.md); alone, nothing is split again",
    )
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")


EVAL_DESCRIPTION = (
    "DATASET is a BEIR folder (corpus.jsonl, queries.jsonl, qrels/<split>.tsv), indexed in memory or into "
    "--dir (reused when it already holds documents), or a question file over an existing index (--dir, default "
    f"$FINDERLEDGE_PERSIST_DIRECTORY or {DEFAULT_DIR}): a JSON list of {{query, expected_source, "
    "expected_keywords} or JSONL of {question, gold_sources}. A gold source names a file (docs/faq.md), a page "
    "or row (manual.pdf:p3, data.csv:r1) or a chunk (<source>#<split_index>)."
)


def _add_eval(sub: Any) -> None:
    """The ``eval`` subcommand."""
    p = sub.add_parser(
        "eval",
        help=f"evaluate the search modes ({', '.join(SEARCH_MODES)}) side by side",
        description=EVAL_DESCRIPTION,
    )
    p.add_argument("dataset", type=Path, help="BEIR folder, or a .json/.jsonl question file")
    p.add_argument("--json", action="store_true", help="print JSON on stdout (always with each query's hits)")
    p.add_argument(
        "--per-query",
        action="store_true",
        help="after the table, each query's gold ids and their rank in each mode",
    )
    p.add_argument("--plot", type=Path, default=None, metavar="PNG", help="write a PNG comparing the modes")
    _output_options(p)
    p.add_argument(
        "-d",
        "--dir",
        default=None,
        help="persist directory to build or reuse (default for a question file: "
        f"$FINDERLEDGE_PERSIST_DIRECTORY or {DEFAULT_DIR}; a BEIR folder is indexed in memory)",
    )
    p.add_argument("--one-chunk", action="store_true", help="index each corpus document as one chunk")
    p.add_argument("--split", default="test", help="qrels split of a BEIR folder (default: test)")
    p.add_argument(
        "-k", type=int, default=None, help="results per query (default: 100 for BEIR, 10 for questions)"
    )
    _vector_store_option(p, "vector store of the index a BEIR folder is indexed into (default faiss)")
    p.add_argument(
        "--embedding",
        default=None,
        metavar="MODEL",
        help="the model the index was built with, e.g. sentence-transformers:/path/to/model",
    )
    p.add_argument(
        "--reranker",
        default=None,
        help="cross-encoder:<name-or-path> (or a bare name/path): rerank each mode's top candidates",
    )
    p.add_argument(
        "--rerank-candidates",
        type=int,
        default=None,
        help=f"candidates the reranker rescores (default {Settings().rerank_candidates})",
    )
    p.add_argument(
        "--fusion",
        choices=list(FUSIONS),
        default=None,
        help="how hybrid fuses the two legs (default adaptive)",
    )
    p.add_argument(
        "--modes",
        default=",".join(SEARCH_MODES),
        help=f"comma-separated modes to compare (default {','.join(SEARCH_MODES)})",
    )
    p.add_argument("--no-progress", action="store_true", help="hide the progress bars")


# Help texts of the serve/keys options that server/commands.py declares without one (filled in here, where
# every other option's help lives; an option that gains its own help there keeps it).
SERVER_OPTION_HELP = {
    ("serve", "host"): "address to listen on (default 127.0.0.1; another address needs an API key or "
    "--allow-no-auth)",
    ("serve", "port"): "port to listen on (default 8000)",
    ("serve", "max_upload_mb"): "largest upload accepted, in MB (default 50)",
    ("serve", "embedding"): "the model the index is built with, e.g. sentence-transformers:/path/to/model",
    (
        "serve",
        "vector_store",
    ): "vector store of a new index (default faiss); on an existing index, switch the "
    "index to this vector store (rebuilt from the ledger)",
    ("create", "tenant"): "the tenant whose documents the key reads and writes",
    ("revoke", "key_id"): "the key's id (from 'finderledge keys list'; not the key itself)",
}


def _fill_server_help(sub: Any) -> None:
    """Give the serve/keys options without a help text the ones in :data:`SERVER_OPTION_HELP`."""
    parsers = dict(sub.choices)
    # argparse has no public way to list a parser's actions: its private list is read, never changed
    for action in parsers["keys"]._actions:  # noqa: SLF001
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            parsers.update(action.choices)
    for (command, dest), text in SERVER_OPTION_HELP.items():
        for action in parsers[command]._actions:  # noqa: SLF001
            if action.dest == dest and not action.help:
                action.help = text


def build_parser() -> argparse.ArgumentParser:
    """The ``finderledge`` argument parser."""
    parser = _Parser(prog=PROG, description="Hybrid (BM25 + vector) retrieval for RAG.")
    parser.add_argument("--version", action="version", version=f"{PROG} {package_version()}")
    _output_options(parser, top=True)
    parser.set_defaults(verbosity=0, debug=False)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_add(sub)
    _add_search(sub, "search", "search the index")
    _add_search(sub, "context", "print a prompt-ready context")
    _add_search(sub, "answer", ANSWER_SUMMARY)
    _add_small_commands(sub)
    _add_eval(sub)
    add_commands(sub, _default_dir(), _output_options)
    add_mcp_command(sub, _default_dir(), _output_options)
    _fill_server_help(sub)
    return parser


# -- helpers --------------------------------------------------------------------------------------
def _require_index(directory: str | os.PathLike[str]) -> None:
    """Refuse a directory without a ledger, before FinderLedge would create one there."""
    from ..facade import LEDGER_FILE

    if not (Path(directory).expanduser() / LEDGER_FILE).is_file():
        raise UsageError(
            f"no FinderLedge index at {os.fspath(directory)} "
            f"(build one with: finderledge add PATH --dir {os.fspath(directory)})"
        )


def _open(args: argparse.Namespace, *, existing: bool = True, **extra: Any) -> Any:
    """FinderLedge over ``args.dir`` (which must already hold an index unless ``existing`` is false)."""
    if existing and Settings.resolve({}).database_url is None:  # Postgres mode: the database is the index
        _require_index(args.dir)
    from ..facade import FinderLedge

    settings = {"embedding": args.embedding, **extra}
    return FinderLedge(args.dir, **{k: v for k, v in settings.items() if v is not None})


@contextmanager
def _removed_on_failure(directory: str | os.PathLike[str], *, keep_committed: bool = True) -> Iterator[None]:
    """Remove the directories made for ``directory`` when the block fails and they hold nothing: an index
    that committed batches or cached vectors before the failure (Ctrl-C in a long first ``add``) is kept, so
    running the same command again picks up where it stopped.  ``keep_committed=False`` removes them anyway
    (``eval`` would reuse a half-built index as if it were whole)."""
    created, path = None, Path(directory).expanduser().absolute()
    while not os.path.lexists(path) and path != path.parent:
        created, path = path, path.parent
    try:
        yield
    except BaseException:
        if created is not None and created.is_dir() and not created.is_symlink():
            kept = _committed(Path(directory).expanduser()) if keep_committed else None
            if kept is None:
                shutil.rmtree(created, ignore_errors=True)
            else:
                logging.getLogger(__name__).warning(
                    "kept %s: it holds %s committed before the failure; run the same command again to add "
                    "the rest (finderledge gc drops unused cached vectors)",
                    directory,
                    kept,
                )
        raise


def _committed(directory: Path) -> str | None:
    """What a directory's ledger holds (documents, cached vectors) in words, None when it holds nothing;
    a ledger that cannot be read counts as holding something (it is never deleted unread)."""
    from ..facade import LEDGER_FILE

    if not (directory / LEDGER_FILE).is_file():
        return None
    try:
        from ..ledgers.sqlite import SQLiteLedger

        ledger = SQLiteLedger(directory / LEDGER_FILE)
        try:
            documents, cached = ledger.counts()["documents"], ledger.embedding_cache_size()["entries"]
        finally:
            ledger.close()
    except Exception as exc:  # noqa: BLE001 - unreadable: kept, and said why
        return f"a ledger that could not be read ({exc})"
    if not documents and not cached:
        return None
    return f"{documents} documents and {cached} cached vectors"


def _emit(args: argparse.Namespace, data: Any, text: str) -> None:
    """Print ``data`` as JSON with --json, else ``text``."""
    if args.json:
        sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2, default=str) + "\n")
    else:
        sys.stdout.write(text + ("\n" if text and not text.endswith("\n") else ""))


def _query(args: argparse.Namespace) -> str:
    """The query, refused when empty."""
    if not args.query.strip():
        raise UsageError("the query is empty")
    return str(args.query)


def _filter(args: argparse.Namespace) -> Any:
    """The --filter JSON, parsed."""
    if args.filter is None:
        return None
    try:
        return json.loads(args.filter)
    except ValueError as exc:
        raise UsageError(f'--filter: expected JSON such as \'{{"lang": "ja"}}\' ({exc})') from None


# -- commands -------------------------------------------------------------------------------------
def _add_sources(args: argparse.Namespace) -> list[Any]:
    """The paths (each must exist: a typo is never indexed as text) and the --text documents."""
    if not args.paths and not args.text:
        raise UsageError("nothing to add: give files or folders, or --text TEXT to add literal text")
    args.metadata = parse_metadata(args.metadata)  # refused before anything is created
    sources: list[Any] = []
    for given in args.paths:
        path = Path(given).expanduser()
        if not os.path.lexists(path):
            raise UsageError(f"no such file or directory: {given} (to add literal text, use --text TEXT)")
        sources.append(path)
    if args.text:
        from langchain_core.documents import Document

        for text in args.text:
            if not text.strip():
                raise UsageError("--text: the text is empty")
            sources.append(Document(page_content=text))
    return sources


def _check_added(report: Any, args: argparse.Namespace) -> None:
    """Fail when nothing is stored and nothing pruned: every file skipped, or no file found (an empty folder,
    only hidden files, everything excluded by --include/--exclude)."""
    if report.ids or report.pruned:
        return
    if report.skipped:
        reasons = [f"skipped {path}: {reason}" for path, reason in report.skipped[:3]]
        more = len(report.skipped) - len(reasons)
        raise UsageError("nothing added: " + "; ".join(reasons) + (f"; and {more} more" if more else ""))
    where = ", ".join(args.paths)
    if report.files_seen == 0:
        filters = "; check --include/--exclude" if args.include or args.exclude else ""
        raise UsageError(f"nothing added: no files found in {where} (hidden files are skipped{filters})")
    raise UsageError(f"nothing added: the {report.files_seen} file(s) found in {where} hold no text")


def _cmd_add(args: argparse.Namespace) -> int:
    """finderledge add."""
    sources = _add_sources(args)
    progress = False if args.no_progress else None
    with (
        _removed_on_failure(args.dir),
        _open(args, existing=False, vector_store=args.vector_store, show_progress=progress) as fl,
    ):
        report = fl.ingest(
            sources,
            args.metadata,
            include=args.include,
            exclude=args.exclude,
            on_error=args.on_error,
            prune=args.prune,
            follow_symlinks=args.follow_symlinks,
        )
        _check_added(report, args)
        totals = fl.count()
    text = report.summary() + f"\nindex now holds {totals['documents']} documents, {totals['chunks']} chunks"
    _emit(args, {**report.to_dict(), "totals": totals}, text)
    return 0


def _cmd_search(args: argparse.Namespace) -> int:
    """finderledge search."""
    query, filter_, options = _query(args), _filter(args), search_kwargs(args)
    with _open(args) as fl:
        results = fl.search(
            query, k=args.k, search_mode=args.mode, filter=filter_, return_parents=args.parents, **options
        )
    from ..rag.context import citation

    text = "\n".join(
        f"{r.rank}. [{r.score:.4f}] ({citation(r.metadata, r.parent_id)}) id={r.id}\n   "
        + r.content[:200].replace("\n", " ")
        for r in results
    )
    _emit(args, [r.to_dict() for r in results], text or _no_results(args))
    return 0 if results else EXIT_NOT_FOUND


def _no_results(args: argparse.Namespace) -> str:
    """What search prints when nothing is found (and why, when --score-threshold left everything out)."""
    if args.score_threshold is None:
        return "no results"
    return f"no results (none scored at least --score-threshold {args.score_threshold:g})"


def _cmd_context(args: argparse.Namespace) -> int:
    """finderledge context."""
    from ..rag.context import NO_CONTEXT

    query, filter_, options = _query(args), _filter(args), search_kwargs(args)
    with _open(args) as fl:
        results = fl.search(
            query, k=args.k, search_mode=args.mode, filter=filter_, return_parents=args.parents, **options
        )
        ctx = fl.get_context(results=results, max_chars=args.max_chars)  # NO_CONTEXT when none is left
    _emit(args, {"query": query, "context": ctx, "found": ctx != NO_CONTEXT}, ctx)
    return 0 if ctx != NO_CONTEXT else EXIT_NOT_FOUND


def _cmd_answer(args: argparse.Namespace) -> int:
    """finderledge answer: FinderLedge.answer with the LLM --llm (or $FINDERLEDGE_LLM) names, else the
    extractive answer; the text, then the sources its [n] refer to. Exit 1 when nothing relevant was found."""
    question, filter_, options = _query(args), _filter(args), search_kwargs(args)
    llm = None
    if args.llm:
        from ..rag.llms import make_chat_model

        llm = make_chat_model(args.llm, base_url=args.llm_base_url)
    with _open(args) as fl:
        answer = fl.answer(
            question,
            llm,
            k=args.k,
            search_mode=args.mode,
            filter=filter_,
            max_chars=args.max_chars,
            **options,
        )
    lines = [answer.text]
    if answer.sources:
        lines.append("\nsources:")
        for s in answer.sources:
            page = f", page {s.page}" if s.page is not None else ""
            lines.append(f"[{s.n}] {s.source}{page} (chunk {s.chunk_id}, score {s.score:.4f})")
    _emit(args, answer.to_dict(), "\n".join(lines))
    return 0 if answer.sources else EXIT_NOT_FOUND


def _cmd_remove(args: argparse.Namespace) -> int:
    """finderledge remove."""
    removed: list[str] = []
    missing: list[str] = []
    with _open(args) as fl:
        for key in args.ids:
            try:
                removed.extend(fl.remove_document(key))
            except DocumentNotFoundError:
                missing.append(key)
    text = "\n".join([f"removed {i}" for i in removed] + [f"not found: {m}" for m in missing])
    _emit(args, {"removed": removed, "not_found": missing}, text)
    return EXIT_NOT_FOUND if missing else 0


def _cmd_list(args: argparse.Namespace) -> int:
    """finderledge list."""
    flt = _filter(args)
    with _open(args) as fl:
        docs = fl.list_documents(source=args.source, filter=flt, offset=args.offset, limit=args.limit)
        total = fl.count(filter=and_filters(flt, {"source": args.source} if args.source else None))
    data = [
        {
            "id": d.id,
            "source": source_of(d.metadata, d.id),
            "locator": d.metadata.get("locator"),
            "chunks": info_of(d.metadata).get("split_count"),
            "chars": len(d.page_content),
        }
        for d in docs
    ]
    text = "\n".join(f"{d['id']}  {d['source']} {d['locator'] or ''}  chunks={d['chunks']}" for d in data)
    shown = f"{len(data)} of {total['documents']} documents ({total['chunks']} chunks)"
    if args.offset:
        shown += f", from #{args.offset + 1}"
    _emit(args, data, (text + "\n" if text else "no documents listed\n") + shown)
    return 0


def _cmd_stats(args: argparse.Namespace) -> int:
    """finderledge stats."""
    with _open(args) as fl:
        stats = fl.stats()
    _emit(args, stats, format_stats(stats))
    return 0


def format_stats(stats: dict[str, Any]) -> str:
    """``FinderLedge.stats()`` as lines a person reads (``--json`` prints the dict itself)."""
    cache = stats.get("embedding_cache") or {}
    settings = stats.get("settings") or {}
    lines = [
        f"documents: {stats.get('documents')}, chunks: {stats.get('chunks')}",
        (
            f"keyword index: {stats.get('keyword_index_chunks')} chunks; "
            f"vector index: {stats.get('vector_index_chunks')} chunks"
        ),
        f"embedding model: {stats.get('embedding_model')}",
        (
            f"embedding cache: {cache.get('entries', 0)} vectors ({cache.get('bytes', 0) / 1e6:.1f} MB; "
            "finderledge gc empties it)"
        ),
        f"persist directory: {stats.get('persist_directory') or 'in memory'}",
    ]
    shown = ("vector_store", "chunk_size", "chunk_overlap", "chunk_unit", "search_mode", "fusion", "k")
    lines.append("settings: " + ", ".join(f"{k} {settings[k]}" for k in shown if settings.get(k) is not None))
    return "\n".join(lines)


def _cmd_gc(args: argparse.Namespace) -> int:
    """finderledge gc."""
    with _open(args) as fl:
        report = fl.gc()
    _emit(
        args,
        report,
        f"removed {report['removed']} cached vectors; the cache holds {report['entries']} "
        f"({report['bytes'] / 1e6:.1f} MB)",
    )
    return 0


def _cmd_check(args: argparse.Namespace) -> int:
    """finderledge check [--repair]: exit 0 when no damage is found, 1 when some is (repaired or not), 3 when
    the disk is full and part of it could not run."""
    from ..replica.checking import check_directory

    settings = Settings.resolve({})
    if settings.database_url is not None:  # Postgres mode: what the database keeps, checked there
        report = _check_database(settings.database_url, settings.database_schema, args.repair)
    else:
        _require_index(args.dir)
        report = check_directory(args.dir)
        if args.repair:
            report = _repaired(args, report)
    _emit(args, report.to_dict(), report.text())
    if report.disk_full:
        return EXIT_DISK_FULL
    return 0 if report.clean and not report.not_repaired else 1


def _check_database(url: str, schema: str, repair: bool) -> Any:
    """check [--repair] of the PostgreSQL ledger at ``url`` (no model, no local replica opened)."""
    from ..ledgers.postgres import PostgresLedger
    from ..replica.checking import check_database, repair_database

    ledger = PostgresLedger(url, schema=schema)
    try:
        report = check_database(ledger)
        return repair_database(ledger, report) if repair else report
    finally:
        ledger.close()


def _repaired(args: argparse.Namespace, found: Any) -> Any:
    """``found`` repaired through FinderLedge.check(repair=True); opening may rebuild an index first, so the
    report still says what was found before.  No embedding model is loaded unless --embedding names one."""
    from ..errors import IndexCorruptError, StorageFullError
    from ..replica.ledger_vectors import repair_model

    if found.disk_full:  # the disk is full: a repair writes, and what is damaged is not even known yet
        found.disk_full.append("not repaired: free some space and run check --repair again")
        return found
    stand_in = repair_model(args.dir) if args.embedding is None else None
    report = None
    try:
        with _open(args, embedding=stand_in) if stand_in is not None else _open(args) as fl:
            report = fl.check(repair=True)
    except StorageFullError as exc:
        (report or found).disk_full.append(
            f"not repaired, the disk is full ({exc.detail}): free some space and run check --repair again"
        )
    except IndexCorruptError as exc:  # the ledger itself (LedgerCorruptError): nothing can rebuild it
        (report or found).not_repaired.append(f"the directory cannot be opened to repair it: {exc}")
    if report is None:
        return found
    report.problems = found.problems + [p for p in report.problems if p not in found.problems]
    report.notes = found.notes + [n for n in report.notes if n not in found.notes]
    report.disk_full = found.disk_full + [d for d in report.disk_full if d not in found.disk_full]
    for leg in found.damaged_indexes:  # opening moved it aside and rebuilt it already
        if leg not in report.damaged_indexes and not any(
            r.startswith(f"{leg} index") for r in report.repaired
        ):
            report.repaired.append(f"{leg} index: moved aside and rebuilt from the ledger")
    return report


def _on_off(value: str) -> bool:
    """``on``/``off`` (or true/false, yes/no, 1/0) as a flag; anything else is a usage error."""
    word = value.strip().lower()
    if word in ("on", "true", "yes", "1"):
        return True
    if word in ("off", "false", "no", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected on or off, got {value!r}")


def _cmd_reindex(args: argparse.Namespace) -> int:
    """finderledge reindex: FinderLedge.reindex with the given chunk settings; --vector-store switches the store
    as the index opens (alone, it re-splits nothing)."""
    chunking = {
        "chunk_size": args.chunk_size,
        "chunk_overlap": args.chunk_overlap,
        "chunk_unit": args.chunk_unit,
        "chunk_context": args.chunk_context,
    }
    resplit = any(v is not None for v in chunking.values()) or (
        args.vector_store is None and args.vector_index is None
    )
    progress = False if args.no_progress else None
    with _open(args, vector_store=args.vector_store, show_progress=progress) as fl:
        if args.vector_index is not None:
            fl.reindex(vector_index=args.vector_index)
        report = fl.reindex(**chunking) if resplit else None
        settings = {
            k: getattr(fl.settings, k)
            for k in (
                "chunk_size",
                "chunk_overlap",
                "chunk_unit",
                "chunk_context",
                "vector_store",
                "vector_index",
            )
        }
        totals = fl.count()
    lines = []
    if report is not None:
        lines.append(
            f"split {len(report.replaced)} documents again into {report.chunks_written} chunks "
            f"(embedded {report.embeddings_computed}, from cache {report.embeddings_cached}) "
            f"in {report.seconds_total:.1f} s"
        )
    shown = {
        k: ("on" if v else "off") if isinstance(v, bool) else v for k, v in settings.items()
    }  # as the flags say
    lines.append("recorded settings: " + ", ".join(f"{k} {v}" for k, v in shown.items()))
    lines.append(f"index now holds {totals['documents']} documents, {totals['chunks']} chunks")
    data = {
        "reindexed": report.to_dict() if report is not None else None,
        "settings": settings,
        "totals": totals,
    }
    _emit(args, data, "\n".join(lines))
    return 0


def _eval_directory(args: argparse.Namespace) -> str | None:
    """Where eval reads or builds the index: a question file needs an existing one (default dir as elsewhere)."""
    if not args.dataset.exists():
        raise UsageError(f"no such file or directory: {args.dataset}")
    if args.dataset.is_dir():  # a BEIR folder: indexed in memory, or into --dir
        return str(args.dir) if args.dir is not None else None
    directory = str(args.dir) if args.dir is not None else _default_dir()
    _require_index(directory)
    return directory


def _cmd_eval(args: argparse.Namespace) -> int:
    """finderledge eval."""
    from ..evaluation import EvaluationInterrupted, format_report, plot_report

    if args.k is not None and args.k < 1:
        raise UsageError(f"-k: expected a positive number of results per query, got {args.k}")
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not modes:
        raise UsageError(f"--modes: give at least one of {', '.join(SEARCH_MODES)}")
    directory = _eval_directory(args)
    stopped: EvaluationInterrupted | None = None
    with _removed_on_failure(directory, keep_committed=False) if directory is not None else nullcontext():
        try:
            report = _evaluate(args, directory, modes)
        except EvaluationInterrupted as stop:  # Ctrl-C while the queries ran: print what was measured
            if stop.report is None:
                raise
            stopped, report = stop, stop.report
    data = report.to_dict()
    if args.plot is not None:
        try:
            data["plot"] = str(plot_report(report, args.plot))
        except ImportError as exc:
            raise UsageError(str(exc)) from None
    table = format_report(report, per_query=args.per_query)
    _emit(args, data, table + (f"\nplot: {args.plot}" if args.plot is not None else ""))
    return 130 if stopped is not None else 0


def _evaluate(args: argparse.Namespace, directory: str | None, modes: list[str]) -> Any:
    """evaluation.evaluate with the command's arguments."""
    from ..evaluation import evaluate

    return evaluate(
        args.dataset,
        persist_directory=directory,
        modes=modes,
        split=args.split,
        one_chunk=args.one_chunk,
        k=args.k,
        show_progress=False if args.no_progress else None,
        vector_store=args.vector_store,
        embedding=args.embedding,
        fusion=args.fusion,
        reranker=args.reranker,
        rerank_candidates=args.rerank_candidates,
    )


def _cmd_keys(args: argparse.Namespace) -> int:
    """finderledge keys: ``list`` and ``revoke`` read an index's keys, so a directory holding neither an index
    nor keys is refused like every other read command (``create`` may come first: ``serve`` builds the index)."""
    if args.keys_command != "create":
        from ..server.config import SERVER_DIR
        from ..server.keys import KEYS_FILE

        directory = Path(args.dir).expanduser()
        if not (directory / SERVER_DIR / KEYS_FILE).is_file():
            _require_index(directory)
    return int(SERVER_COMMANDS["keys"](args))


COMMANDS = {
    "add": _cmd_add,
    "search": _cmd_search,
    "context": _cmd_context,
    "answer": _cmd_answer,
    "remove": _cmd_remove,
    "list": _cmd_list,
    "stats": _cmd_stats,
    "gc": _cmd_gc,
    "check": _cmd_check,
    "reindex": _cmd_reindex,
    "eval": _cmd_eval,
    **SERVER_COMMANDS,
    "keys": _cmd_keys,
    **MCP_COMMANDS,
}


# -- failures -------------------------------------------------------------------------------------
def _missing_openai_key(exc: BaseException) -> bool:
    """Whether ``exc`` is the OpenAI client refusing to start without an API key (a configuration error)."""
    message = str(exc)
    return type(exc).__module__.split(".")[0] == "openai" and (
        "api_key" in message or "OPENAI_API_KEY" in message or "credentials" in message.lower()
    )


def _describe(exc: BaseException) -> str:
    """One line saying what failed."""
    if _missing_openai_key(exc):
        return (
            "no OpenAI API key: set OPENAI_API_KEY in the environment (an 'openai:' model, e.g. "
            "--embedding openai:text-embedding-3-small, needs it)"
        )
    if isinstance(exc, OSError) and not isinstance(exc, FinderLedgeError) and exc.filename is not None:
        reason = exc.strerror or str(exc)
        text = f"{reason[:1].lower()}{reason[1:]}: {exc.filename}"
    elif isinstance(exc, (UsageError, FinderLedgeError, ValueError, OSError)):
        text = str(exc)
    else:
        text = f"{type(exc).__name__}: {exc} (unexpected; --debug shows the traceback)"
    if isinstance(exc, IncompatibleIndexError):
        text += " (on the command line: --embedding MODEL)"
    return " ".join(part.strip() for part in text.splitlines() if part.strip()) or type(exc).__name__


def _failure(args: argparse.Namespace, exc: Exception) -> int:
    """Report a failed command (one line, or the traceback with --debug); return its exit code."""
    if args.debug:
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    else:
        sys.stderr.write(f"{PROG} {args.command}: error: {_describe(exc)}\n")
    return EXIT_NOT_FOUND if isinstance(exc, DocumentNotFoundError) else EXIT_BAD_INPUT


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``finderledge`` console script; returns the exit code."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a usage error argparse has printed
        return exc.code if isinstance(exc.code, int) else 0
    with stderr_logging(args.verbosity, args.debug):
        try:
            return int(COMMANDS[args.command](args))
        except KeyboardInterrupt:
            sys.stderr.write(f"{PROG} {args.command}: interrupted\n")
            return EXIT_INTERRUPTED
        except Exception as exc:  # noqa: BLE001 - every failure becomes one line and an exit code
            return _failure(args, exc)


if __name__ == "__main__":
    sys.exit(main())
