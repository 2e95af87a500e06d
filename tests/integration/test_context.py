"""Contexts: formatting results the caller already has, numbering from 0 or 1, citation formats and templates."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import run_doc_samples
from langchain_core.documents import Document

from finderledge import NO_CONTEXT, FinderLedge
from finderledge.errors import ConfigurationError
from finderledge.rag.context import citation_fields, format_context

ROOT = Path(__file__).resolve().parents[2]
Q = "How long is a password reset link valid?"
TODAIJI = (
    "東大寺は奈良県奈良市にある華厳宗の大本山の寺院である。\n\n"
    "盧舎那仏像は聖武天皇の発願で造立された大仏である。\n\n"
    "正倉院には聖武天皇の遺品を中心とする宝物が収められている。"
)


@pytest.fixture
def fl(minilm: Any) -> Iterator[FinderLedge]:
    ledger = FinderLedge(
        embedding=minilm, chunk_size=100, chunk_overlap=0, show_progress=False, env_file=None
    )
    ledger.add_document(
        [
            Document(
                page_content="A password reset link is valid for 30 minutes.",
                metadata={"source": "reset.txt"},
            ),
            Document(
                page_content="Invoices are sent on the first day of each month.",
                metadata={"source": "billing.md"},
            ),
            Document(page_content=TODAIJI, metadata={"source": "jawiki:東大寺"}),
        ]
    )
    yield ledger
    ledger.close()


def test_the_default_format_is_unchanged_and_results_are_not_searched_again(
    fl: FinderLedge, monkeypatch: pytest.MonkeyPatch
) -> None:
    results = fl.search(Q, k=2)
    expected = fl.get_context(Q, k=2)
    assert expected.startswith(
        "[1] (source: reset.txt, chunk 1/1)\nA password reset link is valid for 30 minutes.\n\n[2] ("
    )
    assert format_context(results) == expected

    def no_search(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("get_context(results=...) must not search")

    monkeypatch.setattr(fl, "search", no_search)
    assert fl.get_context(results=results) == expected
    # a cap below the citation keeps text, never a cut citation; a larger one cuts the text after it
    assert fl.get_context(results=list(results)[:1], max_chars=30) == "A password reset link is valid"
    assert fl.get_context(results=list(results)[:1], max_chars=50) == expected[:50]


def test_langchain_documents_from_a_retriever_are_formatted_too(fl: FinderLedge) -> None:
    docs = fl.as_retriever(k=2).invoke(Q)
    assert fl.get_context(results=docs) == fl.get_context(Q, k=2)


def test_numbering_from_zero_and_citation_formats(fl: FinderLedge) -> None:
    results = fl.search("正倉院の宝物", k=1, search_mode="keyword")
    assert results[0].metadata["_finderledge"]["split_index"] == 2
    assert fl.get_context(results=results, start=0).startswith(
        "[0] (source: jawiki:東大寺, chunk 3/3)\n正倉院"
    )
    assert fl.get_context(results=results, citation="{source}#chunk={chunk}").startswith(
        "[1] (jawiki:東大寺#chunk=3)\n"
    )  # {chunk} counts from 1 like the default citation's "chunk 3/3" (issue 31)
    assert fl.get_context(results=results, citation="{source}#{chunk_index}").startswith(
        "[1] (jawiki:東大寺#2)\n"
    )  # split_index, as in chunk-level gold ids
    assert format_context(results, citation="{source_id}{page}{row} {chunk_number}/{chunks}").startswith(
        "[1] ( 3/3)"
    )  # fields a chunk lacks are empty
    assert format_context(
        results,
        citation=lambda md: f"{md['source']} ¶{md['_finderledge']['split_index']}",
        template="<doc n={n} cite='{citation}'>{content}</doc>",
    ) == ("<doc n=1 cite='jawiki:東大寺 ¶2'>正倉院には聖武天皇の遺品を中心とする宝物が収められている。</doc>")
    two = fl.search(Q, k=2)
    numbers = re.findall(r"^\[(\d+)\]", fl.get_context(results=two, start=0), flags=re.MULTILINE)
    assert numbers == ["0", "1"]
    # a search and its formatting in one call take the same options
    assert fl.get_context(Q, k=2, start=0, citation="{source}") == fl.get_context(
        results=two, start=0, citation="{source}"
    )


def test_citation_fields_of_a_pdf_page_chunk() -> None:
    md = {
        "source": "/nowhere/manual.pdf",
        "file_name": "manual.pdf",
        "source_id": "manual.pdf:p3",
        "locator": "p3",
        "page": 3,
        "_finderledge": {
            "split_index": 1,
            "split_count": 4,
            "is_parent": False,
            "id": "P-0001",
            "parent_id": "P",
        },
    }
    fields = citation_fields(md)
    assert (fields["source"], fields["source_id"], fields["page"], fields["row"]) == (
        "/nowhere/manual.pdf",
        "manual.pdf:p3",
        3,
        "",
    )
    assert (fields["chunk"], fields["chunk_number"], fields["chunks"], fields["id"]) == (2, 2, 4, "P-0001")
    assert fields["chunk_index"] == 1  # split_index: {chunk} counts from 1 like "chunk 2/4" (issue 31)


def test_nothing_to_format_is_no_context(fl: FinderLedge) -> None:
    assert fl.get_context(results=[]) == NO_CONTEXT
    assert format_context([], start=0, citation="{source}") == NO_CONTEXT
    assert fl.get_context("qqzzxxyy", search_mode="keyword", start=0) == NO_CONTEXT


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"start": -1}, "start"),
        ({"start": True}, "start"),
        ({"citation": "{nope}"}, r"citation.*'nope'.*source"),
        ({"citation": "{source"}, "citation"),
        ({"citation": 3}, "citation"),
        ({"template": "[{n}] {text}"}, r"template.*'text'"),
        ({"template": "[{n}] ({citation})"}, r"template.*\{content\}"),
    ],
)
def test_bad_format_options_name_the_argument(fl: FinderLedge, kwargs: dict[str, Any], message: str) -> None:
    results = fl.search(Q, k=1)
    with pytest.raises(ConfigurationError, match=message):
        format_context(results, **kwargs)
    with pytest.raises(ConfigurationError, match=message):
        fl.get_context(results=results, **kwargs)
    with pytest.raises(ConfigurationError, match=message):  # checked before searching, too
        fl.get_context(Q, **kwargs)


def test_query_or_results_not_both(fl: FinderLedge) -> None:
    results = fl.search(Q, k=1)
    with pytest.raises(ConfigurationError, match="query or results"):
        fl.get_context()
    with pytest.raises(ConfigurationError, match="query or results"):
        fl.get_context(Q, results=results)
    with pytest.raises(ConfigurationError, match="'k'.*results"):
        fl.get_context(results=results, k=3)  # search options would be silently ignored
    with pytest.raises(ConfigurationError, match="'filter'.*results"):
        fl.get_context(results=results, filter={"source": "reset.txt"})
    with pytest.raises(ConfigurationError, match="results"):
        fl.get_context(results="A password reset link")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="results"):
        format_context([{"text": "not a result"}])  # type: ignore[list-item]


def test_the_context_page_runs_as_written(shared_model_in_samples: None) -> None:
    """Every Python block of docs/context.md runs (with the shared model, to save loading it again)."""
    run_doc_samples("context.md")
