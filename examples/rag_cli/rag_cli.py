"""Question answering over PDFs and CSVs: FinderLedge hybrid search -> rerank -> LLM (or extractive) answer.

    python examples/rag_cli/rag_cli.py ingest examples/rag_cli/data
    python examples/rag_cli/rag_cli.py ask "How often should I descale the machine?"
    python examples/rag_cli/rag_cli.py eval examples/rag_cli/eval.json

Settings come from the environment or a ``.env`` file (see settings.py and README.md); ``--llm`` and
``--llm-base-url`` override ``LLM`` and ``LLM_BASE_URL``.  Errors are one line on stderr (``--debug``: traceback).
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from settings import Settings, SettingsError, load_settings

DEFAULT_INDEX = str(Path(__file__).resolve().parent / ".rag_index")  # beside this script, git-ignored
EXTRA = 'pip install "finderledge[examples]"'  # what this example needs beyond FinderLedge itself
_TOKEN = re.compile(r"[0-9a-z]+|[\u3040-\u30ff\u3400-\u9fff]")  # Latin words/numbers, single kana or kanji


def open_index(path: str, settings: Settings, *, must_exist: bool) -> Any:
    """The FinderLedge index at ``path`` (default embedding model: the bundled offline MiniLM)."""
    from finderledge import FinderLedge

    if must_exist and not (Path(path) / "ledger.sqlite3").exists():
        raise SettingsError(f"no index at {path}: run 'rag_cli.py ingest DIR' first (or pass --index)")
    return FinderLedge(
        path, chunk_size=settings.chunk_size, chunk_overlap=settings.chunk_overlap, show_progress=False
    )


def make_app(
    ledger: Any, settings: Settings, timings: defaultdict[str, list[float]] | None = None
) -> tuple[Any, str]:
    """The compiled graph and a one-line description of its reranker and answerer."""
    try:
        from graph import build_graph, make_reranker
    except ModuleNotFoundError as exc:  # langgraph: an optional dependency, named with its extra
        raise SettingsError(f"this example needs {exc.name}, which is not installed: {EXTRA}") from exc

    from finderledge import make_chat_model

    reranker, reranker_name = make_reranker(settings.reranker, ledger)
    llm = make_chat_model(settings.llm, base_url=settings.llm_base_url) if settings.llm else None
    app = build_graph(
        ledger, reranker, llm, search_k=settings.search_k, rerank_top_k=settings.rerank_top_k, timings=timings
    )
    return app, f"reranker: {reranker_name}; answers: {settings.llm or 'extractive (no LLM set)'}"


def cmd_ingest(args: argparse.Namespace, settings: Settings) -> int:
    with open_index(args.index, settings, must_exist=False) as ledger:
        report = ledger.ingest(args.dir)
        held = ledger.count()
        print(
            f"indexed {len(report.ids)} pages/rows ({report.chunks_written} new chunks) into {args.index}; "
            f"{len(report.skipped)} file(s) skipped; the index holds {held['documents']} pages/rows, "
            f"{held['chunks']} chunks"
        )
        for skipped in report.skipped:
            print(f"  skipped {skipped}")
    return 0


def cmd_ask(args: argparse.Namespace, settings: Settings) -> int:
    with open_index(args.index, settings, must_exist=True) as ledger:
        app, _ = make_app(ledger, settings)
        state = app.invoke({"query": args.question})
    print("=== Answer ===")
    print(state["answer"])
    print("\n=== Sources ===")
    for n, (source, doc) in enumerate(zip(state["sources"], state["reranked_documents"]), start=1):
        print(f"[{n}] {source}  (rerank score {doc.metadata['rerank_score']:.3f})")
    return 0


def faithfulness(answer: str, contexts: list[str]) -> float:
    """Share of the answer's sentences whose tokens (words, numbers, kana/kanji) are >= 80 % in the contexts.

    A simple lexical support check, not an entailment judgement: the extractive note and [n] markers are ignored.
    """
    from finderledge.server.answers import EXTRACTIVE_NOTE

    known = set(_TOKEN.findall("\n".join(contexts).lower()))
    text = re.sub(r"\[\d+\]", " ", answer.replace(EXTRACTIVE_NOTE, " "))
    sentences = [
        s for s in re.split(r"(?<=[.!?。！？])\s+|(?<=[。！？])|\n+", text) if _TOKEN.search(s.lower())
    ]
    if not sentences:
        return 0.0
    supported = 0
    for sentence in sentences:
        tokens = _TOKEN.findall(sentence.lower())
        supported += sum(t in known for t in tokens) >= 0.8 * len(tokens)
    return supported / len(sentences)


def run_eval(
    app: Any, items: list[dict[str, Any]], timings: defaultdict[str, list[float]], verbose: bool
) -> dict[str, float]:
    """Run every question through the graph (after an untimed warm-up); the figures, as shares of questions."""
    from finderledge.evaluation import gold_matches

    for warm_up in ("warm-up", "ウォームアップ"):  # loads the models and the Japanese tokenizer: not timed
        app.invoke({"query": warm_up})
    timings.clear()
    sums = dict.fromkeys(("retrieval_k", "retrieval_top", "faithfulness", "exact_match"), 0.0)
    for item in items:
        start = time.perf_counter()
        state = app.invoke({"query": item["query"]})
        timings["total"].append(time.perf_counter() - start)
        gold = item["expected_source"]
        found_top = any(gold_matches(gold, d.metadata) for d in state["reranked_documents"])
        matched = all(k.lower() in state["answer"].lower() for k in item.get("expected_keywords") or [])
        sums["retrieval_k"] += any(gold_matches(gold, d.metadata) for d in state["documents"])
        sums["retrieval_top"] += found_top
        sums["exact_match"] += matched
        sums["faithfulness"] += faithfulness(state["answer"], state["contexts"])
        if verbose:
            print(
                f"{'ok ' if found_top else 'MISS'} {'EM' if matched else '--'}  {item['query']}  -> "
                f"{', '.join(state['sources'])}  (expected {gold})"
            )
    return {name: total / len(items) for name, total in sums.items()}


def cmd_eval(args: argparse.Namespace, settings: Settings) -> int:
    import dataclasses

    import numpy as np

    items = json.loads(Path(args.questions).read_text(encoding="utf-8"))
    if (
        not isinstance(items, list)
        or not items
        or not all(isinstance(i, dict) and {"query", "expected_source"} <= i.keys() for i in items)
    ):
        raise SettingsError(
            f"{args.questions}: expected a JSON list of {{query, expected_source, "
            "expected_keywords}} objects"
        )
    timings: defaultdict[str, list[float]] = defaultdict(list)
    with open_index(args.index, settings, must_exist=True) as ledger:
        app, description = make_app(ledger, settings, timings)
        got = run_eval(app, items, timings, verbose=True)
        print(f"\n=== Evaluation: {len(items)} questions; {description} ===")
        print(f"Retrieval@{settings.search_k} (retrieve)      {got['retrieval_k']:.3f}")
        print(f"Retrieval@{settings.rerank_top_k} (after rerank)   {got['retrieval_top']:.3f}")
        print(f"Faithfulness              {got['faithfulness']:.3f}")
        print(f"Exact Match               {got['exact_match']:.3f}")
        print("Latency ms (p50 / p95, warm-up excluded):")
        for stage in ("retrieve", "rerank", "generate", "total"):
            ms = np.array(timings[stage]) * 1000
            print(f"  {stage:<9} {np.percentile(ms, 50):8.1f} / {np.percentile(ms, 95):8.1f}")
        if args.compare:  # the same questions with other RERANKER values, one row each
            print(
                f"\n=== Rerankers compared: Retrieval@{settings.rerank_top_k}, Exact Match, rerank p50 ms ==="
            )
            rows = [(description.split(";")[0], got, timings["rerank"])]
            for spec in args.compare.split(","):
                timings = defaultdict(list)
                other, other_description = make_app(
                    ledger, dataclasses.replace(settings, reranker=spec.strip()), timings
                )
                rows.append(
                    (
                        other_description.split(";")[0],
                        run_eval(other, items, timings, verbose=False),
                        timings["rerank"],
                    )
                )
            for name, figures, rerank_times in rows:
                print(
                    f"  {figures['retrieval_top']:.3f}  {figures['exact_match']:.3f}  "
                    f"{np.percentile(np.array(rerank_times) * 1000, 50):8.1f}  {name}"
                )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", default=DEFAULT_INDEX, help=f"index directory (default {DEFAULT_INDEX})")
    parser.add_argument(
        "--llm", help="openai:<model> | ollama:<model> | llamacpp:<path.gguf> (overrides LLM)"
    )
    parser.add_argument("--llm-base-url", help="the LLM server's URL (overrides LLM_BASE_URL)")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("ingest", help="index the PDFs, CSVs (and other documents) of a folder").add_argument(
        "dir"
    )
    commands.add_parser("ask", help="answer a question").add_argument("question")
    evaluation = commands.add_parser("eval", help="evaluate over a JSON list of questions")
    evaluation.add_argument("questions")
    evaluation.add_argument(
        "--compare", help="also evaluate these RERANKER values (comma-separated), e.g. fused,embedding"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    try:
        settings = load_settings({"LLM": args.llm, "LLM_BASE_URL": args.llm_base_url})
        return {"ingest": cmd_ingest, "ask": cmd_ask, "eval": cmd_eval}[args.command](args, settings)
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # a CLI: one line, not a traceback (unless --debug)
        if args.debug:
            raise
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
