"""The ``finderledge`` command line: add, search, context, remove, list, stats and eval.

Exit codes: 0 success, 1 nothing found (search/context) or a document not found (remove), 2 bad usage
or input.  ``--json`` prints machine-readable output on stdout; logs go to stderr.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["main", "build_parser"]

DEFAULT_DIR = ".finderledge"


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-d", "--dir", default=os.environ.get("FINDERLEDGE_PERSIST_DIRECTORY", DEFAULT_DIR),
                        help=f"persist directory (default: $FINDERLEDGE_PERSIST_DIRECTORY or {DEFAULT_DIR})")
    parser.add_argument("--json", action="store_true", help="print JSON on stdout")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details to stderr")


def _search_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("query")
    parser.add_argument("-k", type=int, default=None, help="number of results")
    parser.add_argument("-m", "--mode", choices=["hybrid", "vector", "keyword"], default=None)
    parser.add_argument("--filter", default=None, help='metadata filter as JSON, e.g. \'{"lang": "ja"}\'')
    parser.add_argument("--parents", action="store_true", help="return parent documents instead of chunks")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="finderledge", description="Hybrid (BM25 + vector) retrieval for RAG.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("add", help="add files, folders or text")
    _common(p)
    p.add_argument("paths", nargs="+", help="files or directories")
    p.add_argument("--include", action="append", help="glob of files to include (repeatable)")
    p.add_argument("--exclude", action="append", help="glob of files to exclude (repeatable)")
    p.add_argument("--on-error", choices=["skip", "raise"], default="skip")
    p.add_argument("--vector-store", choices=["chroma", "faiss"], default=None)
    p.add_argument("--embedding", default=None, help="e.g. sentence-transformers:/path/to/model, openai:<model>")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.add_argument("--prune", action="store_true", help="remove documents whose files no longer exist under the folders")
    p.add_argument("--follow-symlinks", action="store_true", help="follow symlinks found inside the folders")

    for name, help_text in (("search", "search the index"), ("context", "print a prompt-ready context")):
        p = sub.add_parser(name, help=help_text)
        _common(p)
        _search_options(p)
        if name == "context":
            p.add_argument("--max-chars", type=int, default=None)

    p = sub.add_parser("remove", help="remove documents by parent id or source path")
    _common(p)
    p.add_argument("ids", nargs="+")

    p = sub.add_parser("list", help="list stored documents")
    _common(p)
    p.add_argument("--source", default=None)
    p.add_argument("--limit", type=int, default=None)

    p = sub.add_parser("stats", help="counts and settings")
    _common(p)

    p = sub.add_parser("eval", help="evaluate hybrid, vector and keyword modes side by side",
                       description="DATASET is a BEIR folder (corpus.jsonl, queries.jsonl, qrels/<split>.tsv), "
                       "indexed in memory or into --dir (reused when it already holds documents), or a question "
                       "file over an existing index (--dir, default $FINDERLEDGE_PERSIST_DIRECTORY or "
                       f"{DEFAULT_DIR}): a JSON list of {{query, expected_source, expected_keywords}} "
                       "or JSONL of {question, gold_sources}. A gold source names a file (docs/faq.md), a page "
                       "or row (manual.pdf:p3, data.csv:r1) or a chunk (<source>#<split_index>).")
    p.add_argument("dataset", type=Path, help="BEIR folder, or a .json/.jsonl question file")
    p.add_argument("--json", action="store_true", help="print JSON on stdout")
    p.add_argument("--plot", type=Path, default=None, metavar="PNG", help="write a PNG comparing the modes")
    p.add_argument("-v", "--verbose", action="store_true")
    p.add_argument("-d", "--dir", default=None,
                   help="persist directory to build or reuse (default for a question file: "
                   f"$FINDERLEDGE_PERSIST_DIRECTORY or {DEFAULT_DIR}; a BEIR folder is indexed in memory)")
    p.add_argument("--one-chunk", action="store_true", help="index each corpus document as one chunk")
    p.add_argument("--split", default="test", help="qrels split of a BEIR folder (default: test)")
    p.add_argument("-k", type=int, default=None, help="results per query (default: 100 for BEIR, 10 for questions)")
    p.add_argument("--vector-store", choices=["chroma", "faiss"], default=None)
    p.add_argument("--embedding", default=None,
                   help="the model the index was built with, e.g. sentence-transformers:/path/to/model")
    p.add_argument("--reranker", default=None,
                   help="cross-encoder:<name-or-path> (or a bare name/path): rerank each mode's top candidates")
    p.add_argument("--rerank-candidates", type=int, default=None, help="candidates the reranker rescores (default 20)")
    p.add_argument("--fusion", choices=["rrf", "relative_score", "dbsf"], default=None)
    p.add_argument("--modes", default="hybrid,vector,keyword")
    p.add_argument("--no-progress", action="store_true")
    return parser


def _open(args: argparse.Namespace, **extra: Any) -> Any:
    from .facade import FinderLedge

    return FinderLedge(args.dir, **{k: v for k, v in extra.items() if v is not None})


def _emit(args: argparse.Namespace, data: Any, text: str) -> None:
    if args.json:
        sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2, default=str) + "\n")
    else:
        sys.stdout.write(text + ("\n" if text and not text.endswith("\n") else ""))


def _cmd_add(args: argparse.Namespace) -> int:
    with _open(args, vector_store=args.vector_store, embedding=args.embedding,
               show_progress=False if args.no_progress else None) as fl:
        report = fl.ingest(list(args.paths), include=args.include, exclude=args.exclude, on_error=args.on_error,
                           prune=args.prune, follow_symlinks=args.follow_symlinks)
        totals = fl.count()
    text = report.summary() + f"\nindex now holds {totals['documents']} documents, {totals['chunks']} chunks"
    _emit(args, {**report.to_dict(), "totals": totals}, text)
    return 0


def _filter(args: argparse.Namespace) -> Any:
    if args.filter is None:
        return None
    try:
        return json.loads(args.filter)
    except ValueError as exc:
        raise ValueError(f"--filter: expected JSON such as '{{\"lang\": \"ja\"}}' ({exc})") from exc


def _cmd_search(args: argparse.Namespace) -> int:
    with _open(args) as fl:
        results = fl.search(args.query, k=args.k, search_mode=args.mode, filter=_filter(args),
                            return_parents=args.parents)
    from .context import citation

    text = "\n".join(f"{r.rank}. [{r.score:.4f}] ({citation(r.metadata)}) id={r.id}\n   "
                     + r.content[:200].replace("\n", " ") for r in results)
    _emit(args, [r.to_dict() for r in results], text or "no results")
    return 0 if results else 1


def _cmd_context(args: argparse.Namespace) -> int:
    from .context import NO_CONTEXT

    with _open(args) as fl:
        ctx = fl.get_context(args.query, k=args.k, search_mode=args.mode, filter=_filter(args),
                             return_parents=args.parents, max_chars=args.max_chars)
    _emit(args, {"query": args.query, "context": ctx, "found": ctx != NO_CONTEXT}, ctx)
    return 0 if ctx != NO_CONTEXT else 1


def _cmd_remove(args: argparse.Namespace) -> int:
    removed: list[str] = []
    missing: list[str] = []
    with _open(args) as fl:
        for key in args.ids:
            try:
                removed.extend(fl.remove_document(key))
            except KeyError:
                missing.append(key)
    text = "\n".join([f"removed {i}" for i in removed] + [f"not found: {m}" for m in missing])
    _emit(args, {"removed": removed, "not_found": missing}, text)
    return 1 if missing else 0


def _cmd_list(args: argparse.Namespace) -> int:
    with _open(args) as fl:
        docs = fl.list_documents(source=args.source, limit=args.limit)
    data = [{"id": d.id, "source": d.metadata.get("source"), "locator": d.metadata.get("locator"),
             "chunks": d.metadata.get("split_count"), "chars": len(d.page_content)} for d in docs]
    text = "\n".join(f"{d['id']}  {d['source'] or '(text)'} {d['locator'] or ''}  chunks={d['chunks']}" for d in data)
    _emit(args, data, text or "no documents")
    return 0


def _cmd_stats(args: argparse.Namespace) -> int:
    with _open(args) as fl:
        stats = fl.stats()
    text = "\n".join(f"{k}: {v}" for k, v in stats.items() if k != "settings")
    _emit(args, stats, text)
    return 0


def _cmd_eval(args: argparse.Namespace) -> int:
    from .errors import IncompatibleIndexError
    from .evaluation import evaluate, format_report, plot_report

    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    directory = args.dir
    if directory is None and not args.dataset.is_dir():  # a question file reads the index the other commands use
        directory = os.environ.get("FINDERLEDGE_PERSIST_DIRECTORY") or DEFAULT_DIR
    try:
        report = evaluate(args.dataset, persist_directory=directory, modes=modes, split=args.split,
                          one_chunk=args.one_chunk, k=args.k, show_progress=False if args.no_progress else None,
                          vector_store=args.vector_store, embedding=args.embedding, fusion=args.fusion,
                          reranker=args.reranker, rerank_candidates=args.rerank_candidates)
    except IncompatibleIndexError as exc:
        raise ValueError(f"{exc} (on the command line: --embedding MODEL)") from None
    data = report.to_dict()
    if args.plot is not None:
        try:
            data["plot"] = str(plot_report(report, args.plot))
        except ImportError as exc:
            raise ValueError(str(exc)) from None
    _emit(args, data, format_report(report) + (f"\nplot: {args.plot}" if args.plot is not None else ""))
    return 0


COMMANDS = {"add": _cmd_add, "search": _cmd_search, "context": _cmd_context, "remove": _cmd_remove,
            "list": _cmd_list, "stats": _cmd_stats, "eval": _cmd_eval}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``finderledge`` console script."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return COMMANDS[args.command](args)
    except (ValueError, FileNotFoundError, KeyError) as exc:
        sys.stderr.write(f"finderledge {args.command}: error: {exc}\n")
        return 2


if __name__ == "__main__":
    sys.exit(main())
