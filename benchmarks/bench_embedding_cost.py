"""Embedding cost in real use (issue 29): FinderLedge's default model in a real scifact ingest vs LangChain's
``HuggingFaceEmbeddings`` (langchain-huggingface: sentence-transformers, PyTorch) with the same bundled model.

Three runs per round, interleaved (the order reverses every round, so neither side always goes first), on the
first ``--documents`` scifact documents (``title``, blank line, ``text``, as ``finderledge eval`` adds them):

* ``finderledge``: ``FinderLedge(persist_directory=<fresh temp dir>)`` with its defaults (``onnx-int8`` MiniLM,
  FAISS, the default chunking) and ``add_documents``: every text the model is handed is counted and timed
  (chunks included), and the whole ingest's wall time is taken;
* ``peer_same_texts``: ``HuggingFaceEmbeddings.embed_documents`` on exactly the texts FinderLedge embedded
  (the same passages, so passages/s compare the two runtimes alone);
* ``peer_whole_documents``: the same peer on one text per document (what a hand-wired LangChain ingest of the
  abstracts embeds); sentence-transformers truncates each to the model's 256 tokens (counted below).

Both sides use the same thread count (ONNX Runtime intra-op threads of the default model; ``torch.set_num_threads``
for the peer).  The model is loaded and warmed before anything is timed.  Figures are medians over rounds; the
load average is noted before and after.  Results go to ``benchmarks/results/embedding_cost.json``.

    python benchmarks/bench_embedding_cost.py --documents 1000 --rounds 2
    python benchmarks/bench_embedding_cost.py --documents 20 --rounds 1 --out /tmp/cost.json   # smoke run

Only ratios within one run count: the machine is shared, absolute figures move 2-3x with its load.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from langchain_core.documents import Document

from finderledge import FinderLedge
from finderledge.embeddings.names import default_model_path

HERE = Path(__file__).resolve().parent
SCIFACT = HERE.parents[1] / "shared" / "datasets" / "scifact"
OUT = HERE / "results" / "embedding_cost.json"
RUNS = ("finderledge", "peer_same_texts", "peer_whole_documents")


def load_average() -> list[float] | None:
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None


def uptime() -> str:
    """The ``uptime`` line (load averages), as the issue's figures note it."""
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        return f"load average: {load_average()}"


def read_documents(folder: Path, n: int) -> list[Document]:
    """The first ``n`` corpus documents, as ``finderledge.evaluation.index_beir`` adds them."""
    docs: list[Document] = []
    with open(folder / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            if len(docs) >= n:
                break
            row = json.loads(line)
            text = f"{row.get('title', '')}\n\n{row.get('text', '')}".strip()
            docs.append(Document(page_content=text, metadata={"beir_id": str(row["_id"])}))
    return docs


class Counted:
    """Counts texts and seconds of ``embed_documents`` and ``embed_queries`` on one model instance (patched on the
    instance, undone by ``close``): the ingest embeds its chunks as passages, and its calibration embeds sampled
    sentences as queries and held-out chunk rests as passages."""

    def __init__(self, model: Any) -> None:
        self.texts: list[str] = []
        self.queries = 0
        self.seconds = 0.0  # inside embed_documents (passages)
        self.query_seconds = 0.0  # inside embed_queries
        self._model = model
        self._patched: list[str] = []
        for name in ("embed_documents", "embed_queries"):
            original = getattr(model, name, None)
            if callable(original):
                object.__setattr__(model, name, self._wrap(original, passages=name == "embed_documents"))
                self._patched.append(name)

    def _wrap(self, original: Any, *, passages: bool) -> Any:
        def counted(texts: list[str]) -> list[list[float]]:
            start = time.perf_counter()
            try:
                return original(texts)  # type: ignore[no-any-return]
            finally:
                if passages:
                    self.seconds += time.perf_counter() - start
                    self.texts.extend(texts)
                else:
                    self.query_seconds += time.perf_counter() - start
                    self.queries += len(texts)

        return counted

    def close(self) -> None:
        for name in self._patched:
            object.__delattr__(self._model, name)


def finderledge_ingest(docs: Sequence[Document], work: Path, batch: int = 512) -> dict[str, Any]:
    """A real default ingest into a fresh directory: wall time, and the texts the model embedded."""
    fl = FinderLedge(persist_directory=str(work))
    model = fl.embeddings
    model.embed_documents(["warm-up: load the model before timing"])
    counter = Counted(model)
    start = time.perf_counter()
    try:
        for s in range(0, len(docs), batch):
            fl.add_documents(list(docs[s : s + batch]))
        fl.wait_for_calibration()  # the calibration the writes started (in the background): counted, as before
    finally:
        counter.close()
    wall = time.perf_counter() - start
    chunks = fl.count()
    fl.close()
    return {
        "wall_s": wall,
        "embed_s": counter.seconds,
        "texts": len(counter.texts),  # passages: the chunks, then calibration's held-out rests
        "query_texts": counter.queries,  # calibration's sampled sentences, embedded as queries
        "query_embed_s": counter.query_seconds,
        "chunks_stored": chunks.get("chunks"),
        "model": type(model).__name__,
        "threads": getattr(model, "num_threads", None),
        "_texts": counter.texts,
    }


def peer_model(threads: int) -> Any:
    """LangChain's HuggingFaceEmbeddings on the bundled model folder (offline), ``threads`` torch threads."""
    import torch
    from langchain_huggingface import HuggingFaceEmbeddings

    torch.set_num_threads(threads)
    model = HuggingFaceEmbeddings(
        model_name=default_model_path(),
        model_kwargs={"device": "cpu"},
        encode_kwargs={"normalize_embeddings": True},
    )
    model.embed_documents(["warm-up: load the model before timing"])
    return model


def peer_embed(model: Any, texts: Sequence[str]) -> dict[str, Any]:
    start = time.perf_counter()
    vectors = model.embed_documents(list(texts))
    wall = time.perf_counter() - start
    assert len(vectors) == len(texts)
    return {"wall_s": wall, "embed_s": wall, "texts": len(texts)}


def truncated(model: Any, texts: Sequence[str]) -> dict[str, Any]:
    """How many ``texts`` exceed the peer's ``max_seq_length`` (their tails are never embedded)."""
    client = model._client  # the SentenceTransformer inside the LangChain wrapper (no public accessor)
    limit = int(client.max_seq_length)
    lengths = [len(ids) for ids in client.tokenizer(list(texts), add_special_tokens=True)["input_ids"]]
    over = sum(1 for n in lengths if n > limit)
    return {
        "max_seq_length": limit,
        "texts_over": over,
        "share_over": round(over / max(1, len(lengths)), 3),
        "tokens_median": statistics.median(lengths) if lengths else 0,
    }


def summarise(runs: dict[str, list[dict[str, Any]]], documents: int) -> dict[str, Any]:
    """Medians over rounds: passages/s inside the model, wall seconds per document, texts per document."""
    out: dict[str, Any] = {}
    for name, rows in runs.items():
        texts = rows[0]["texts"]
        wall = statistics.median(r["wall_s"] for r in rows)
        embed = statistics.median(r["embed_s"] for r in rows)
        out[name] = {
            "texts": texts,
            "texts_per_document": round(texts / documents, 3),
            "passages_per_s": round(texts / embed, 1),
            "embed_s": round(embed, 2),
            "wall_s": round(wall, 2),
            "wall_ms_per_document": round(1000 * wall / documents, 2),
            "rounds_wall_s": [round(r["wall_s"], 2) for r in rows],
        }
    fl, same, whole = (out[name] for name in RUNS)
    first = runs["finderledge"][0]
    fl["chunks_per_document"] = round(first["chunks_stored"] / documents, 3)
    fl["query_texts_per_document"] = round(first["query_texts"] / documents, 3)
    out["ratios"] = {
        "chunks_finderledge_over_peer_whole": round(first["chunks_stored"] / whole["texts"], 2),
        "passages_per_s_finderledge_over_peer": round(fl["passages_per_s"] / same["passages_per_s"], 2),
        "texts_finderledge_over_peer_whole": round(fl["texts"] / whole["texts"], 2),
        "wall_per_document_finderledge_over_peer_whole": round(
            fl["wall_ms_per_document"] / whole["wall_ms_per_document"], 2
        ),
    }
    return out


def run(docs: Sequence[Document], rounds: int, work: Path) -> dict[str, Any]:
    """Interleaved rounds of the three runs; the first ingest fixes the texts the peer embeds."""
    load_before, uptime_before, started = load_average(), uptime(), time.perf_counter()
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in RUNS}
    peer = None
    same_texts: list[str] = []
    whole = [d.page_content for d in docs]
    threads = 0
    for rnd in range(rounds):
        order = RUNS if rnd % 2 == 0 else tuple(reversed(RUNS))
        if not same_texts:  # the texts come from an ingest: the first round starts with it
            order = RUNS
        for name in order:
            if name == "finderledge":
                row = finderledge_ingest(docs, work / f"round-{rnd}")
                same_texts = same_texts or row.pop("_texts")
                row.pop("_texts", None)
                threads = threads or int(row["threads"] or 1)
            else:
                peer = peer or peer_model(threads)
                row = peer_embed(peer, same_texts if name == "peer_same_texts" else whole)
            runs[name].append(row)
            print(f"round {rnd + 1} {name}: {json.dumps(row)}", file=sys.stderr, flush=True)
    assert peer is not None
    return {
        "documents": len(docs),
        "rounds": rounds,
        "threads": threads,
        "summary": summarise(runs, len(docs)),
        "peer_truncation": {
            "whole_documents": truncated(peer, whole),
            "finderledge_texts": truncated(peer, same_texts),
        },
        "runs": runs,
        "seconds": round(time.perf_counter() - started, 1),
        "load_before": load_before,
        "load_after": load_average(),
        "uptime_before": uptime_before,
        "uptime_after": uptime(),
    }


def table(result: dict[str, Any]) -> str:
    """A markdown table of the summary."""
    s = result["summary"]
    head = (
        f"scifact, first {result['documents']} documents, {result['rounds']} interleaved rounds, "
        f"{result['threads']} threads each; load {result['load_before']} -> {result['load_after']}"
    )
    lines = [
        head,
        "",
        (
            "| run | chunks / document | passages / document (embedded) | passages/s (in the model) "
            "| wall ms / document |"
        ),
        "|---|---|---|---|---|",
    ]
    labels = {
        "finderledge": "FinderLedge ingest (onnx-int8, default chunking)",
        "peer_same_texts": "HuggingFaceEmbeddings, the same texts",
        "peer_whole_documents": "HuggingFaceEmbeddings, one text per document",
    }
    for name in RUNS:
        row = s[name]
        chunks = row.get("chunks_per_document", row["texts_per_document"])
        lines.append(
            f"| {labels[name]} | {chunks} | {row['texts_per_document']} | {row['passages_per_s']} | "
            f"{row['wall_ms_per_document']} |"
        )
    r = s["ratios"]
    lines.append("")
    lines.append(
        f"passages/s FinderLedge / peer (same texts): {r['passages_per_s_finderledge_over_peer']}x; "
        f"texts FinderLedge / peer (whole documents): {r['texts_finderledge_over_peer_whole']}x; "
        f"wall per document FinderLedge / peer (whole documents): "
        f"{r['wall_per_document_finderledge_over_peer_whole']}x"
    )
    lines.append(
        f"FinderLedge's passages include calibration's held-out chunk rests; it also embedded "
        f"{s['finderledge']['query_texts_per_document']} query texts per document (calibration; in its wall time, "
        f"not in its passages/s)"
    )
    t = result["peer_truncation"]["whole_documents"]
    lines.append(
        f"the peer truncates {t['texts_over']} of {result['documents']} whole documents at "
        f"{t['max_seq_length']} tokens (median {t['tokens_median']} tokens)"
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--documents", type=int, default=1000, help="the first N scifact documents")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--dataset", type=Path, default=SCIFACT)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    docs = read_documents(args.dataset, args.documents)
    with tempfile.TemporaryDirectory(prefix="embedding-cost-") as tmp:
        result = run(docs, args.rounds, Path(tmp))
    result.update(
        {
            "at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "dataset": str(args.dataset.name),
            "python": platform.python_version(),
            "cpu_count": os.cpu_count(),
        }
    )
    result["table_markdown"] = table(result)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(result["table_markdown"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
