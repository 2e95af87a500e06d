"""Question answering over PDFs and CSVs: FinderLedge hybrid search -> rerank -> LLM (or extractive) answer.

    python examples/rag_cli/rag_cli.py ingest examples/rag_cli/data
    python examples/rag_cli/rag_cli.py ask "How often should I descale the machine?"
    python examples/rag_cli/rag_cli.py eval examples/rag_cli/eval.json

Settings come from the environment or a ``.env`` file (see settings.py and README.md); ``--llm`` and
``--llm-base-url`` override ``LLM`` and ``LLM_BASE_URL``; ``DB_HOST`` (with ``DB_USER``, ``DB_PASSWORD``,
``DB_NAME``) keeps the index in PostgreSQL + pgvector.  Errors are one line on stderr (``--debug``: traceback).
The Makefile runs the same commands as ``python -m rag_cli`` from this folder (``make ingest``, ``make ask Q=…``).
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from metrics import exact_match, measure_latency, retrieval_at_k
from metrics import faithfulness as keyword_faithfulness
from settings import Settings, SettingsError, load_settings

DEFAULT_INDEX = str(Path(__file__).resolve().parent / ".rag_index")  # beside this script, git-ignored
EXTRA = 'pip install "finderledge[examples]"'  # what this example needs beyond FinderLedge itself
COLLECTION_NAME = "documents"  # the design's pgvector collection: here the PostgreSQL schema of the index
_TOKEN = re.compile(r"[0-9a-z]+|[\u3040-\u30ff\u3400-\u9fff]")  # Latin words/numbers, single kana or kanji


def open_index(path: str, settings: Settings, *, must_exist: bool) -> Any:
    """The FinderLedge index: at ``path``, or with ``DB_HOST`` set in PostgreSQL + pgvector (schema
    ``documents``); chunks of CHUNK_SIZE characters (default embedding model: the bundled offline MiniLM)."""
    from finderledge import FinderLedge

    options = {
        "chunk_size": settings.chunk_size,
        "chunk_overlap": settings.chunk_overlap,
        "chunk_unit": "chars",
        "show_progress": False,
    }
    if settings.database_url is not None:
        ledger = FinderLedge(database_url=settings.database_url, database_schema=COLLECTION_NAME, **options)
        if must_exist and ledger.count()["documents"] == 0:
            ledger.close()
            raise SettingsError(
                f"no documents in PostgreSQL {settings.db['DB_NAME']!r} at {settings.db['DB_HOST']}: "  # type: ignore[index]
                "run 'rag_cli.py ingest DIR' first"
            )
        return ledger
    if must_exist and not (Path(path) / "ledger.sqlite3").exists():
        raise SettingsError(f"no index at {path}: run 'rag_cli.py ingest DIR' first (or pass --index)")
    return FinderLedge(path, **options)


def where(args: argparse.Namespace, settings: Settings) -> str:
    """Where the index lives, for messages: the directory, or the PostgreSQL database and schema."""
    if settings.db is None:
        return str(args.index)
    return f"PostgreSQL {settings.db['DB_NAME']} at {settings.db['DB_HOST']} (schema {COLLECTION_NAME})"


def get_llm(settings: Settings) -> Any:
    """The LLM ``LLM`` names, or ``None`` (extractive answers). ``llamacpp:<path.gguf>`` is LangChain's
    ``LlamaCpp`` with the design's parameters: ``n_ctx`` (LLM_N_CTX, 2048), ``max_tokens`` (LLM_MAX_TOKENS,
    300), ``verbose`` (LLM_VERBOSE, false)."""
    from finderledge import make_chat_model

    if not settings.llm:
        return None
    provider, _, model_path = settings.llm.partition(":")
    if provider != "llamacpp":
        return make_chat_model(settings.llm, base_url=settings.llm_base_url)
    if not Path(model_path).is_file():
        raise SettingsError(f"LLM: no such model file {model_path!r} (a local .gguf is expected)")
    try:
        from langchain_community.llms import LlamaCpp
    except ImportError:
        raise SettingsError(
            'LLM=llamacpp:… needs pip install "langchain-community llama-cpp-python"'
        ) from None
    return LlamaCpp(
        model_path=model_path,
        n_ctx=settings.llm_n_ctx,
        max_tokens=settings.llm_max_tokens,
        verbose=settings.llm_verbose,
    )


def make_app(
    ledger: Any, settings: Settings, timings: defaultdict[str, list[float]] | None = None
) -> tuple[Any, str]:
    """The compiled graph and a one-line description of its reranker and answerer."""
    try:
        from graph import build_graph, make_reranker
    except ModuleNotFoundError as exc:  # langgraph: an optional dependency, named with its extra
        raise SettingsError(
            f"this example needs {(exc.name or 'langgraph').split('.')[0]}, which is not installed: {EXTRA}"
        ) from exc

    reranker, reranker_name = make_reranker(settings.reranker, ledger)
    llm = get_llm(settings)
    app = build_graph(
        ledger, reranker, llm, search_k=settings.search_k, rerank_top_k=settings.rerank_top_k, timings=timings
    )
    return app, f"reranker: {reranker_name}; answers: {settings.llm or 'extractive (no LLM set)'}"


def cmd_ingest(args: argparse.Namespace, settings: Settings) -> int:
    with open_index(args.index, settings, must_exist=False) as ledger:
        report = ledger.ingest(args.dir)
        held = ledger.count()
        print(
            f"indexed {len(report.ids)} pages/rows ({report.chunks_written} new chunks) into {where(args, settings)}; "
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
    for source in dict.fromkeys(state["sources"]):  # the design's "- {source}", each source once
        print(f"- {source}")
    return 0


def lexical_faithfulness(answer: str, contexts: list[str]) -> float:
    """Share of the answer's sentences whose tokens (words, numbers, kana/kanji) are >= 80 % in the contexts.

    A simple lexical support check, not an entailment judgement: the extractive note and [n] markers are ignored.
    """
    from finderledge.rag.answer import DEFAULT_PROMPTS

    known = set(_TOKEN.findall("\n".join(contexts).lower()))
    for prompts in DEFAULT_PROMPTS.values():  # the note is in the question's language
        answer = answer.replace(prompts.extractive_note, " ")
    text = re.sub(r"\[\d+\]", " ", answer)
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
    names = (
        "retrieval_k",
        "retrieval_top",
        "faithfulness",
        "exact_match",
        "keyword_faithfulness",
        "design_hit",
    )
    sums = dict.fromkeys(names, 0.0)
    for item in items:
        state, seconds = measure_latency(lambda q=item["query"]: app.invoke({"query": q}))
        timings["total"].append(seconds)
        gold = item["expected_source"]
        keywords = item.get("expected_keywords") or []
        found_top = any(gold_matches(gold, d.metadata) for d in state["reranked_documents"])
        matched = exact_match(state["answer"], keywords)
        sums["retrieval_k"] += any(gold_matches(gold, d.metadata) for d in state["documents"])
        sums["retrieval_top"] += found_top
        sums["design_hit"] += retrieval_at_k([{"source": s} for s in state["sources"]], gold)
        sums["exact_match"] += matched
        sums["keyword_faithfulness"] += keyword_faithfulness(state["answer"], keywords)
        sums["faithfulness"] += lexical_faithfulness(state["answer"], state["contexts"])
        if verbose:
            print(
                f"{'ok ' if found_top else 'MISS'} {'EM' if matched else '--'}  {item['query']}  -> "
                f"{', '.join(state['sources'])}  (expected {gold})"
            )
    return {name: total / len(items) for name, total in sums.items()}


def print_report(settings: Settings, got: dict[str, float], seconds: list[float], questions: int) -> None:
    """The design's report: its settings lines, then Retrieval@k (the expected source among the reranked
    sources), Faithfulness (share of expected keywords in the answer), Exact Match, mean latency."""
    print("=== Evaluation Report ===\n")
    print(f"Chunk={settings.chunk_size} overlap={settings.chunk_overlap}")
    print(f"Top-k={settings.search_k}")
    print(f"Re-rank=ON (top_k={settings.rerank_top_k})\n")
    print(f"Retrieval@k: {got['design_hit']:.1%}")
    print(f"Faithfulness: {got['keyword_faithfulness']:.1%}")
    print(f"Exact Match: {got['exact_match']:.1%}")
    print(f"Latency: {sum(seconds) / max(len(seconds), 1):.1f}s\n")
    print(f"Questions evaluated: {questions}")


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
        print_report(settings, got, timings["total"], len(items))
        print(f"\n=== Details: {len(items)} questions; {description} ===")
        print(f"Retrieval@{settings.search_k} (retrieve)      {got['retrieval_k']:.3f}")
        print(f"Retrieval@{settings.rerank_top_k} (after rerank)   {got['retrieval_top']:.3f}")
        print(f"Faithfulness (supported)  {got['faithfulness']:.3f}")
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
    evaluation.add_argument("questions", nargs="?", default="eval.json", help="default: eval.json")
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
