"""Multi-tenant retrieval on FinderLedge: every strategy sees one user's documents only (optionally one dataset).

Documents carry ``user_id`` and ``dataset`` metadata; a user's handle is a FinderLedge scope
(``fl.scoped({"user_id": ...})``) whose base filter every search, sub-search and retriever keeps, and which a
per-call filter can only narrow.  Strategies: basic, multi_query, decompose, hyde (FinderLedge's own, with an
LLM), compression (LangChain's ContextualCompressionRetriever) and parent_document (FinderLedge's parents).

Run:  python examples/multitenant/app.py --user alice --strategy parent_document "What is my salary?"
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from typing_extensions import Self

from finderledge import ConfigurationError, FinderLedge, make_chat_model
from finderledge.errors import MissingExtraError
from finderledge.rag.scope import Scope

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"

STRATEGIES = ("basic", "multi_query", "decompose", "hyde", "compression", "parent_document")
LLM_STRATEGIES = ("multi_query", "decompose", "hyde")  # FinderLedge's strategy= names
COMPRESSION_THRESHOLD = 0.3  # cosine (same embedding model) a passage needs to survive compression

logger = logging.getLogger("multitenant")


class NeedsLLM(RuntimeError):
    """An LLM strategy was asked for while no LLM is configured."""

    def __init__(self, strategy: str) -> None:
        super().__init__(
            f"strategy {strategy!r} needs an LLM: set LLM=openai:<model> (with LLM_BASE_URL for an "
            "OpenAI-compatible server) or LLM=ollama:<model>, or pass --llm"
        )
        self.strategy = strategy


def build_llm(spec: str | None, base_url: str | None = None) -> Any | None:
    """The LangChain chat model an ``LLM`` setting names, built as ``finderledge serve`` builds it; ``None``: none."""
    return make_chat_model(spec, base_url=base_url) if spec else None


def compressor(embeddings: Embeddings, threshold: float = COMPRESSION_THRESHOLD) -> Any:
    """Split retrieved chunks into sentences and keep those close to the question (same embedding model, offline)."""
    from langchain_classic.retrievers.document_compressors import DocumentCompressorPipeline, EmbeddingsFilter
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    sentences = RecursiveCharacterTextSplitter(
        chunk_size=160, chunk_overlap=0, keep_separator="end", separators=["\n\n", "\n", "。", ". ", " ", ""]
    )
    return DocumentCompressorPipeline(
        transformers=[
            sentences,
            EmbeddingsFilter(embeddings=embeddings, similarity_threshold=threshold, k=None),
        ]
    )


@dataclass
class Retrieval:
    """What one strategy returned for one tenant, and how it ran."""

    strategy: str
    documents: list[Document]
    sub_queries: list[str] = field(default_factory=list)  # the searches an LLM strategy ran
    fallback: str | None = None  # why an LLM strategy fell back to the plain search (the LLM failed)


class TenantView:
    """One user's (and optionally one dataset's) view: every strategy runs inside the scope's base filter."""

    def __init__(self, rag: TenantRAG, user_id: str, dataset: str | None = None) -> None:
        base = {"user_id": user_id} if dataset is None else {"user_id": user_id, "dataset": dataset}
        self.rag = rag
        self.user_id = user_id
        self.dataset = dataset
        self.scope: Scope = rag.fl.scoped(base)

    def _llm_for(self, strategy: str) -> Any:
        if strategy not in STRATEGIES:
            raise ConfigurationError(f"strategy: expected one of {list(STRATEGIES)}, got {strategy!r}")
        if strategy in LLM_STRATEGIES and self.rag.llm is None:
            raise NeedsLLM(strategy)
        return self.rag.llm

    def retriever(
        self, strategy: str = "basic", *, k: int | None = None, filter: Mapping[str, Any] | None = None
    ) -> BaseRetriever:
        """A LangChain retriever for ``strategy`` (for LCEL chains); ``filter`` narrows the tenant's view."""
        llm = self._llm_for(strategy)
        k = k or self.rag.k
        if strategy == "compression":
            from langchain_classic.retrievers import ContextualCompressionRetriever

            return ContextualCompressionRetriever(
                base_compressor=compressor(self.rag.fl.embeddings),
                base_retriever=self.scope.as_retriever(k=k, filter=filter),
            )
        if strategy in LLM_STRATEGIES:
            return self.scope.as_retriever(k=k, filter=filter, strategy=strategy, llm=llm)
        return self.scope.as_retriever(k=k, filter=filter, return_parents=strategy == "parent_document")

    def retrieve(
        self,
        question: str,
        strategy: str = "basic",
        *,
        k: int | None = None,
        filter: Mapping[str, Any] | None = None,
    ) -> Retrieval:
        """The documents ``strategy`` finds for ``question`` in this tenant's documents, with how it ran."""
        llm = self._llm_for(strategy)
        k = k or self.rag.k
        if strategy == "compression":
            return Retrieval(strategy, self.retriever("compression", k=k, filter=filter).invoke(question))
        results = self.scope.search(
            question,
            k=k,
            filter=filter,
            return_parents=strategy == "parent_document",
            strategy=strategy if strategy in LLM_STRATEGIES else None,
            llm=llm,
        )
        subs = [s["text"] for s in results.trace.sub_queries]
        return Retrieval(strategy, [r.document for r in results], subs, results.trace.strategy_fallback)


class TenantRAG:
    """One FinderLedge index holding every tenant's documents; ``for_user`` hands out isolated views."""

    def __init__(
        self,
        persist_directory: str | os.PathLike[str] | None = None,
        *,
        embedding: str | Embeddings | None = None,
        llm: Any = None,
        k: int = 4,
        chunk_size: int = 250,
    ) -> None:
        # small chunks, so that a document has several and parent_document has something to add
        self.fl = FinderLedge(
            persist_directory,
            embedding=embedding,
            chunk_size=chunk_size,
            chunk_overlap=0,
            show_progress=False,
        )
        self.llm = llm
        self.k = k

    def add_folder(self, folder: str | os.PathLike[str] = DATA) -> tuple[int, int]:
        """Index ``folder/<user_id>/<dataset>/…`` with each file's user and dataset.

        Returns (documents in the folder, chunks newly written): unchanged files are not indexed again."""
        documents = chunks = 0
        for user in sorted(p for p in Path(folder).iterdir() if p.is_dir()):
            for dataset in sorted(p for p in user.iterdir() if p.is_dir()):
                report = self.fl.ingest(dataset, metadata={"user_id": user.name, "dataset": dataset.name})
                documents += len(report.ids)
                chunks += report.chunks_written
        return documents, chunks

    def add_texts(self, user_id: str, dataset: str, texts: Sequence[str]) -> list[str]:
        """Index raw texts for one user's dataset (what an upload handler would call)."""
        return self.fl.add_texts(
            list(texts), metadatas=[{"user_id": user_id, "dataset": dataset}] * len(texts)
        )

    def for_user(self, user_id: str, dataset: str | None = None) -> TenantView:
        """The view of ``user_id`` (narrowed to one of their datasets when given)."""
        return TenantView(self, user_id, dataset)

    def close(self) -> None:
        self.fl.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- command line ----------------------------------------------------------------------------------------------
def _label(doc: Document) -> str:
    """``[user_id/dataset] file name``: whose document it is, from its metadata (a leak would show here)."""
    name = Path(str(doc.metadata.get("source") or "(text)")).name
    return f"[{doc.metadata.get('user_id')}/{doc.metadata.get('dataset')}] {name}"


def _show(retrieval: Retrieval) -> None:
    if retrieval.fallback:
        print(
            f"note: {retrieval.strategy} fell back to the plain search, the LLM failed: {retrieval.fallback}"
        )
    for text in retrieval.sub_queries:
        print(f"  searched: {text}")
    if not retrieval.documents:
        print("  (no documents)")
    for n, doc in enumerate(retrieval.documents, start=1):
        print(f"{n}. {_label(doc)}")
        print("   " + " ".join(doc.page_content.split())[:160])


def _json_filter(text: str) -> dict[str, Any]:
    """``--filter``: a JSON object."""
    value = json.loads(text)
    if not isinstance(value, dict):
        raise TypeError("expected a JSON object")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("question")
    parser.add_argument("--user", required=True, help="the user whose documents are searched")
    parser.add_argument("--dataset", help="narrow to one of the user's datasets")
    parser.add_argument("--strategy", default="basic", choices=[*STRATEGIES, "all"])
    parser.add_argument("--filter", type=_json_filter, help="a per-call JSON filter (it can only narrow)")
    parser.add_argument("-k", type=int, default=4)
    parser.add_argument("--data", type=Path, default=DATA, help="folder of <user>/<dataset>/ files")
    parser.add_argument("--index", help="persist directory (default: in memory, re-indexed each run)")
    parser.add_argument(
        "--llm", default=os.environ.get("LLM") or None, help="openai:<model> | ollama:<model>"
    )
    parser.add_argument("--llm-base-url", default=os.environ.get("LLM_BASE_URL") or None)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )  # an LLM fallback
    if not args.data.is_dir():
        parser.error(f"--data: {args.data} is not a folder")
    try:
        llm = build_llm(args.llm, args.llm_base_url)
        with TenantRAG(args.index, llm=llm, k=args.k) as rag:
            documents, chunks = rag.add_folder(args.data)
            print(f"indexed {documents} documents from {args.data.name}/ ({chunks} new chunks)")
            view = rag.for_user(args.user, args.dataset)
            status = 0
            for strategy in STRATEGIES if args.strategy == "all" else (args.strategy,):
                print(f"=== {strategy} (user={args.user}, dataset={args.dataset or 'all'}) ===")
                try:
                    _show(view.retrieve(args.question, strategy, filter=args.filter))
                except NeedsLLM as exc:
                    print(f"skipped: {exc}")
                    status = 0 if args.strategy == "all" else 2  # asked for by name: a failure
            return status
    except (ConfigurationError, MissingExtraError) as exc:  # a setting, or an LLM client not installed
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
