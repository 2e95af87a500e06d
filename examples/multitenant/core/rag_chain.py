"""The design's answer chain in LangChain Expression Language: retriever → context → prompt | llm | parser.

``get_rag_response`` returns the answer with the documents it was written from (the design's sources).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnableLambda, RunnableParallel, RunnablePassthrough

from finderledge.metadata import DOCUMENT_ID

from .retriever_manager import RetrieverManager

PROMPT = ChatPromptTemplate.from_messages(
    [
        (
            "system",
            (
                "You are MochiRAG, an assistant answering from the user's own documents. Answer only from the "
                "numbered context below and cite the passages you use as [n]. If the context does not contain "
                "the answer, say that you cannot find it in the documents. Answer in the question's language."
            ),
        ),
        ("human", "Context:\n{context}\n\nQuestion: {question}"),
    ]
)


def format_docs(docs: Sequence[Document]) -> str:
    """The retrieved documents as one numbered context string (the design's single context string)."""
    return "\n\n".join(f"[{n}] {doc.page_content}" for n, doc in enumerate(docs, start=1))


NO_PASSAGES = "No matching passages were found in your documents."


def build_chain(retriever: BaseRetriever, llm: Any) -> Runnable[str, dict[str, Any]]:
    """question → ``{docs, question, answer}``: the retriever's documents become the prompt's context; with no
    documents the model is not asked (nothing to answer from, so nothing invented)."""
    write = (
        RunnableLambda(lambda x: {"context": format_docs(x["docs"]), "question": x["question"]})
        | PROMPT
        | llm
        | StrOutputParser()
    )
    answer = RunnableLambda(lambda x: write if x["docs"] else NO_PASSAGES)
    return RunnableParallel(docs=retriever, question=RunnablePassthrough()).assign(answer=answer)


def source(n: int, doc: Document) -> dict[str, Any]:
    """A source as the API shows it (never the server's file path)."""
    md = doc.metadata
    return {
        "n": n,
        "document_id": md.get(DOCUMENT_ID),
        "dataset_id": md.get("dataset_id"),
        "filename": md.get("filename") or Path(str(md.get("source") or "")).name or None,
        "page": md.get("page") if isinstance(md.get("page"), int) else None,
        "content": doc.page_content,
    }


def get_rag_response(
    manager: RetrieverManager,
    question: str,
    strategy: str,
    base_filter: dict[str, Any] | None,
    dataset_ids: Sequence[str] | None = None,
    data_source_ids: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The answer to ``question`` from the caller's documents through ``strategy``, with its sources."""
    retriever = manager.get_retriever(strategy, base_filter, dataset_ids, data_source_ids)
    out = build_chain(retriever, manager.llm).invoke(question)
    return {"answer": out["answer"], "sources": [source(n, d) for n, d in enumerate(out["docs"], start=1)]}
