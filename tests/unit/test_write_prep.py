"""The per-document work of a bulk write, made cheaper without changing an answer (issue 29).

Each shortcut is checked against the code it replaced (kept here as the oracle) on texts built to hit every
branch: the type sniffer's substring pre-checks, the ASCII fast path of the weighted length, the splitter's
plain-value form, and a write that hashes each document's version once.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document

import finderledge.ingest.write as ingest_module
from finderledge import ConfigurationError, FinderLedge
from finderledge.document_loader import sniff
from finderledge.ingest import batches as write_batches
from finderledge.ingest.splitter import DocumentSplitter, child_id, weighted_length

pytestmark = pytest.mark.unit

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f\uac00-\ud7af]")


def _old_looks_like_python(text: str) -> bool:
    strong = len(sniff._PY_STRONG.findall(text))
    imports = len(sniff._PY_IMPORT.findall(text))
    return strong + imports >= 2 or (strong >= 1 and not sniff._MD_HEADER.search(text))


def _old_sniff(text: str) -> str:
    """``sniff_doc_type`` before the pre-checks (every regex on every text)."""
    stripped = text.strip()
    if not stripped:
        return "text"
    if stripped[0] in "{[":
        try:
            if isinstance(sniff.json.loads(stripped), (dict, list)):
                return "json"
        except ValueError:
            pass
    if sniff._HTML_DOC.search(stripped[:4096]):
        return "html"
    if sniff._shebang_language(stripped) is not None:
        return "code"
    if sniff._MD_FENCE.search(text):
        return "markdown"
    if _old_looks_like_python(text):
        return "code"
    if sniff._MD_HEADER.search(text) or sniff._MD_SETEXT.search(text):
        return "markdown"
    return "text"


# fragments that trigger (or nearly trigger) each rule, joined at random
FRAGMENTS = [
    "```",
    "~~~",
    "  ```py",
    "# Title",
    "#no space",
    "### h3 ",
    "Heading",
    "\n===",
    "\n---",
    "\n- item",
    "\r\n==",
    "<html>",
    "<HEAD>",
    "<!DOCTYPE html>",
    "<b>bold</b>",
    "<body ",
    "#!/usr/bin/env python3",
    "#!/bin/bash",
    "def f(x):",
    "  async def g(",
    "class A:",
    "class B(Base):",
    "if __name__ == '__main__':",
    "import os",
    "import numpy as np",
    "from a.b import c",
    "default values are defined",
    "the import of goods",
    "classic",
    "日本語の文章です。",
    "漢字",
    "한국어",
    "\u3000",
    "\t",
    "\n",
    "\n\n",
    " ",
    "plain English words.",
    "{",
    "[1, 2]",
    '{"a": 1}',
    "",
]


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=8), st.text(max_size=30))
def test_sniff_pre_checks_give_the_same_type(parts: list[str], noise: str) -> None:
    for text in ("".join(parts), "\n".join(parts), noise + "".join(parts), "".join(parts) + noise):
        assert sniff.sniff_doc_type(text) == _old_sniff(text), repr(text)


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=200))
def test_weighted_length_ascii_fast_path_is_exact(text: str) -> None:
    assert weighted_length(text) == len(text) + 2 * len(_CJK.findall(text))


@pytest.mark.parametrize(
    "text, doc_type",
    [
        ("short text", "text"),
        ("word " * 700, "text"),
        ("# Title\n\nintro\n\n## Part\n\n" + "body text. " * 200, "markdown"),
        ("日本語の文。" * 400, "text"),
    ],
)
def test_split_parts_are_split_document_as_plain_values(text: str, doc_type: str) -> None:
    splitter = DocumentSplitter(chunk_size=300, chunk_overlap=30)
    parent = Document(page_content=text, metadata={"source": "s.md", "n": 1})
    doc, kids = splitter.split_document(parent, "p1", child_id, doc_type=doc_type)
    parent_md, parts = splitter.split_parts(text, parent.metadata, "p1", child_id, doc_type=doc_type)
    assert doc.metadata == parent_md and doc.page_content == text and doc.id == "p1"
    assert [(k.page_content, k.metadata, k.id) for k in kids] == [
        (t, md, md["_finderledge"]["id"]) for t, md in parts
    ]
    assert len(parts) > 1 or len(text) < 300


@pytest.fixture
def hashed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts of the documents whose version a write hashes, one entry per hash."""
    calls: list[str] = []
    real = write_batches.version_hash

    def counted(doc: Document) -> str:
        calls.append(doc.page_content)
        return real(doc)

    monkeypatch.setattr(write_batches, "version_hash", counted)
    monkeypatch.setattr(ingest_module, "version_hash", counted)
    return calls


def test_a_write_hashes_each_documents_version_once(tmp_path, hashed, fake_embeddings) -> None:
    calls = hashed
    texts = [f"document number {i} about hashing" for i in range(50)]
    with FinderLedge(tmp_path / "idx", embedding=fake_embeddings, show_progress=False, env_file=None) as fl:
        fl.add_texts(texts)
        assert sorted(calls) == sorted(texts)  # once each, not once to compare and again to record
        calls.clear()
        fl.add_texts(texts)  # unchanged: compared, nothing recorded
        assert sorted(calls) == sorted(texts)
        assert fl.get_document(fl.add_texts(texts[:1])[0]) is not None  # and stored under that version


def test_caller_ids_are_hashed_once_and_a_repeated_id_is_checked_by_content(
    tmp_path, hashed, fake_embeddings
) -> None:
    """Ids the caller gives: each document's version hashed once in a write (the check that one id names one
    content hashes only a repeated id's documents), an id given twice with different content refused before
    anything is written, twice with the same content stored once."""
    calls = hashed
    texts = [f"document number {i} about ids" for i in range(50)]
    ids = [f"doc-{i}" for i in range(50)]
    with FinderLedge(tmp_path / "idx", embedding=fake_embeddings, show_progress=False, env_file=None) as fl:
        assert fl.add_texts(texts, ids=ids) == ids
        assert sorted(calls) == sorted(texts)  # once each: to compare with the stored version and record it
        calls.clear()
        with pytest.raises(ConfigurationError, match="'doc-x' given twice with different content"):
            fl.add_texts(["one text", "another text"], ids=["doc-x", "doc-x"])
        assert calls == ["one text", "another text"]  # only the repeated id's two documents
        assert fl.get_document("doc-x") is None  # refused before anything was written
        assert fl.add_texts(["same text", "same text"], ids=["doc-y", "doc-y"]) == ["doc-y", "doc-y"]
        assert fl.get_document("doc-y") is not None
        assert fl.count()["documents"] == 51
