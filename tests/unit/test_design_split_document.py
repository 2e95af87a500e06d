"""Issue 44, design 004: ``DocumentSplitter().split_document(doc)``, as the design writes it, raised TypeError.

The design (../shared/seeds/004_1a7e02ffb3cf4bfa.txt) writes, in its class diagram::

    class DocumentSplitter {
       + split_document(doc): List[Document]

and in the add_document flow: "各ドキュメントに対して `DocumentSplitter.split_document` を実行。"
docs/architecture.md lists ``DocumentSplitter.split_document(doc)`` as existing.
"""

from __future__ import annotations

from langchain_core.documents import Document

from finderledge import DocumentSplitter
from finderledge.metadata import FL_KEY, child_id

LONG = "\n\n".join(f"Paragraph {i}. " + "Refunds are paid within five business days. " * 8 for i in range(6))


def test_split_document_of_one_document_returns_its_chunks_as_the_design_writes_it() -> None:
    """``+ split_document(doc): List[Document]``: one argument, a list of ``Document`` back."""
    doc = Document(page_content=LONG, metadata={"source": "refunds.txt", "lang": "en"})
    chunks = DocumentSplitter().split_document(doc)
    assert isinstance(chunks, list) and len(chunks) > 1
    assert all(isinstance(c, Document) for c in chunks)
    # the design's chunk metadata: "parent_id: str (ID of the parent document, if split)", "split_index: int
    # (Order of the split chunk)", "split_count: int (Total number of splits from the parent)" — FinderLedge's
    # own fields, under "_finderledge"; "... (User-provided original metadata)" kept as given
    parent_ids = {c.metadata[FL_KEY]["parent_id"] for c in chunks}
    assert len(parent_ids) == 1
    (pid,) = parent_ids
    assert [c.metadata[FL_KEY]["split_index"] for c in chunks] == list(range(len(chunks)))
    assert {c.metadata[FL_KEY]["split_count"] for c in chunks} == {len(chunks)}
    assert [c.id for c in chunks] == [child_id(pid, i) for i in range(len(chunks))]
    assert all(c.metadata["source"] == "refunds.txt" and c.metadata["lang"] == "en" for c in chunks)
    assert all(c.metadata[FL_KEY]["is_parent"] is False for c in chunks)
    # the chunks cover the text in order
    assert chunks[0].page_content.startswith("Paragraph 0.") and "Paragraph 5." in chunks[-1].page_content


def test_the_parent_id_is_the_documents_own_id_or_stable() -> None:
    doc = Document(page_content=LONG, metadata={"source": "refunds.txt"})
    first = DocumentSplitter().split_document(doc)
    again = DocumentSplitter().split_document(Document(page_content=LONG, metadata={"source": "refunds.txt"}))
    assert [c.id for c in first] == [c.id for c in again]  # the same document gives the same ids
    named = DocumentSplitter().split_document(Document(page_content=LONG, id="refunds", metadata={}))
    assert named[0].id == "refunds-0000" and named[0].metadata[FL_KEY]["parent_id"] == "refunds"


def test_a_short_document_is_one_chunk_and_the_type_is_chosen_from_its_metadata() -> None:
    """ "文書タイプに基づいた適切な LangChain TextSplitter の選択と実行": the loader's ``doc_type_detected`` picks it."""
    (only,) = DocumentSplitter().split_document(Document(page_content="short", metadata={}))
    assert only.page_content == "short" and only.metadata[FL_KEY]["split_count"] == 1
    md = "# Title\n\n## Refunds\n\n" + "Refunds are paid within five business days. " * 40
    chunks = DocumentSplitter(chunk_size=300, chunk_overlap=0).split_document(
        Document(page_content=md, metadata={"doc_type_detected": "markdown"})
    )
    assert len(chunks) > 1 and {c.metadata[FL_KEY]["doc_type"] for c in chunks} == {"markdown"}
    assert chunks[-1].metadata[FL_KEY]["headers"] == "Title > Refunds"


def test_the_library_form_still_returns_the_parent_and_its_children() -> None:
    """The form FinderLedge's writer used before stays: ``split_document(doc, parent_id, make_child_id)``."""
    parent, kids = DocumentSplitter().split_document(Document(page_content=LONG), "P", child_id)
    assert parent.id == "P" and parent.metadata[FL_KEY]["is_parent"] is True
    assert kids[0].id == "P-0000" and parent.metadata[FL_KEY]["split_count"] == len(kids)
