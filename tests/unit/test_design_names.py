"""docs/architecture.md "The design's names": every name the library's design (seed 004) gives is listed, and each
row saying *exists* names a public path that imports; the instance attributes and metadata keys it lists are
checked on a real index (fake embeddings)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT

from finderledge import FinderLedge
from finderledge.metadata import info_of

ARCHITECTURE = ROOT / "docs" / "architecture.md"
# every class and method the design's diagram and tables name (its section 1 and 2)
DESIGN_NAMES = [
    "FinderLedge", "FinderLedge.__init__", "FinderLedge.add_document", "FinderLedge.remove_document",
    "FinderLedge.search", "FinderLedge.get_context", "FinderLedge.as_retriever", "FinderLedge.vector_store",
    "FinderLedge.keyword_store", "FinderLedge.finder", "FinderLedge.config", "Finder", "Finder.search",
    "Finder._reciprocal_rank_fusion", "Finder.retrievers", "EmbeddingModelFactory",
    "EmbeddingModelFactory.create_embeddings", "DocumentSplitter", "DocumentSplitter.split_document",
    "DocumentSplitter.splitters", "BaseDocumentStore", "VectorDocumentStore", "VectorDocumentStore.get_document",
    "VectorDocumentStore.get_parent_document", "VectorDocumentStore.get_split_documents",
    "VectorDocumentStore.embedding_function", "VectorDocumentStore.document_splitter",
    "VectorDocumentStore._add_documents", "ChromaDocumentStore", "FaissDocumentStore", "BM25DocumentStore",
]  # fmt: skip


def rows() -> list[tuple[str, str]]:
    """(design name cell, "here" cell) of the section's table."""
    text = ARCHITECTURE.read_text(encoding="utf-8").split("## The design's names", 1)[1]
    cells = [
        [c.strip() for c in line.strip().strip("|").split("|")]
        for line in text.splitlines()
        if line.startswith("| `")
    ]
    return [(c[0], c[1]) for c in cells]


def resolve(path: str) -> Any:
    """The object a dotted public path names (module, then attributes)."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(path)


def test_every_design_name_is_listed() -> None:
    listed = " ".join(name for name, _ in rows())
    missing = [n for n in DESIGN_NAMES if f"`{n}" not in listed and f"`{n.split('.')[-1]}" not in listed]
    assert not missing, f"docs/architecture.md does not list {missing}"
    for name, here in rows():
        assert here.startswith(("exists", "replaced")), (name, here)


@pytest.mark.parametrize(
    "path",
    sorted(
        {
            m
            for _, here in rows()
            if here.startswith("exists")
            for m in re.findall(r"`(finderledge\.[\w.]+)`", here.split(" —")[0])
        }
    ),
)
def test_exists_rows_import(path: str, tmp_path: Path, fake_embeddings: Any) -> None:
    try:
        resolve(path)
        return
    except AttributeError:
        pass
    cls_path, _, attr = path.rpartition(".")  # an instance attribute (FinderLedge.finder …)
    assert resolve(cls_path) is FinderLedge, path
    with FinderLedge(tmp_path / "idx", embedding=fake_embeddings) as fl:
        assert getattr(fl, attr) is not None, path


def test_replacement_attributes_and_metadata(tmp_path: Path, fake_embeddings: Any) -> None:
    """The replacements the table names on an instance, and the design's metadata keys on a search result."""
    with FinderLedge(tmp_path / "idx", embedding=fake_embeddings, chunk_size=40, chunk_overlap=0) as fl:
        assert fl.settings and fl.embeddings is fake_embeddings and fl.splitter is not None
        text = "FinderLedge keeps one ledger. " * 4
        fl.add_texts([text], metadatas=[{"source": "a.txt"}])
        result = fl.search(text, k=1)[0]
        info = info_of(result.metadata)
        assert {"id", "is_parent", "parent_id", "split_index", "split_count", "doc_type"} <= set(info), info
        assert info["is_parent"] is False and info["split_count"] == len(
            fl.get_split_documents(info["parent_id"])
        )
        assert result.metadata["source"] == "a.txt"
        assert info["relevance_score"] == pytest.approx(result.score)
    assert (tmp_path / "idx" / "bm25").is_dir()
