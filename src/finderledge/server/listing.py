"""Every document of the index as the server shows it, however it was added: an upload or ``add_document(...,
document_id=)`` is its document id; a file added by the CLI or the library is its source (its pages or rows are
one document); raw text is its parent.  Each is titled from its ``title``, else its file's name, else its text.

Documents added without a document id get a stable id here: a hash of their source (the same after a restart
or a re-add), or the parent's own id for raw text, so the page lists, opens and deletes them like uploads.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from pathlib import PurePath
from typing import Any

from langchain_core.documents import Document

from ..filters import and_filters
from ..metadata import DOCUMENT_ID, info_of
from ..results import SearchResult

__all__ = ["display_names", "document_key", "document_page", "group_documents", "same_passages"]

_TITLE_CHARS = 80  # a title taken from raw text's first line is cut here
#: titles that name nothing (a PDF writer's default): the file's name is shown instead
_PLACEHOLDER_TITLES = frozenset({"untitled", "untitled document", "(anonymous)", "anonymous", "no title"})


def document_key(metadata: Mapping[str, Any], parent_id: str) -> str:
    """The id the server shows for the document a parent (or a chunk of it) belongs to."""
    given = metadata.get(DOCUMENT_ID)
    if isinstance(given, str) and given:
        return given
    source = metadata.get("source")
    if isinstance(source, str) and source:
        return hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return parent_id


def display_names(metadata: Mapping[str, Any], text: str = "") -> tuple[str, str]:
    """``(filename, title)``: the uploaded or loaded file's name (never a server path; ``""`` for raw text), and
    the ``title`` metadata (unless a placeholder such as a PDF's "untitled"), else that name, else the text's
    first line."""
    filename = ""
    for key in ("filename", "file_name"):
        value = metadata.get(key)
        if isinstance(value, str) and value.strip():
            filename = value.strip()
            break
    else:
        source = metadata.get("source")
        if isinstance(source, str) and source and not source.startswith("text:"):
            filename = PurePath(source.replace("\\", "/")).name
    title = metadata.get("title")
    if isinstance(title, str) and title.strip() and title.strip().lower() not in _PLACEHOLDER_TITLES:
        return filename, title.strip()
    if filename:
        return filename, filename
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    first = first.lstrip("#").strip()
    return filename, first[:_TITLE_CHARS].rstrip() + ("…" if len(first) > _TITLE_CHARS else "")


def group_documents(parents: Iterable[Document]) -> dict[str, list[Document]]:
    """Parents grouped by :func:`document_key`, in the order each document was first added."""
    grouped: dict[str, list[Document]] = {}
    for parent in parents:
        key = document_key(parent.metadata, str(info_of(parent.metadata).get("id") or parent.id))
        grouped.setdefault(key, []).append(parent)
    return grouped


def document_page(
    ledger: Any, filter: dict[str, Any] | None, start: int, stop: int, batch: int = 500
) -> tuple[list[str], dict[str, list[Document]]]:
    """Every document's id (:func:`document_key`) matching ``filter``, in the order added, and the parents of
    those from ``start`` to ``stop`` (a page).

    When every matching parent has a document id (a server only ever uploaded to), the ids come from the
    ledger's metadata and only the page's parents are read; else the ledger's listing is read, a batch at a
    time without a filter (paged in SQL), so the texts of the other documents are never all held at once."""
    with_id = and_filters(filter, {DOCUMENT_ID: {"$ne": ""}})
    if ledger.count(filter)["documents"] == ledger.count(with_id)["documents"]:
        ids = ledger.list_document_ids(filter=filter)
        chosen = ids[start:stop]
        page: dict[str, list[Document]] = {key: [] for key in chosen}
        if chosen:
            for parent in ledger.list_documents(filter=and_filters(filter, {DOCUMENT_ID: {"$in": chosen}})):
                page[parent.metadata[DOCUMENT_ID]].append(parent)
        return ids, {key: parents for key, parents in page.items() if parents}
    keys: dict[str, int] = {}
    page = {}
    offset = 0
    if filter is not None:  # a filtered listing scans every document's metadata per call: one call
        batch = 0
    while True:
        parents = ledger.list_documents(filter=filter, offset=offset, limit=batch or None)
        for parent in parents:
            key = document_key(parent.metadata, str(info_of(parent.metadata).get("id") or parent.id))
            position = keys.setdefault(key, len(keys))
            if start <= position < stop:
                page.setdefault(key, []).append(parent)
        if not batch or len(parents) < batch:
            return list(keys), page
        offset += batch


def same_passages(
    results: Iterable[SearchResult],
) -> tuple[list[SearchResult], dict[str, list[SearchResult]]]:
    """The results with each text once (the first, best-ranked copy), and the later copies of each kept one by
    its chunk id: the same file added twice (by the CLI, then uploaded) is one passage shown with both sources."""
    kept: list[SearchResult] = []
    first: dict[str, SearchResult] = {}
    copies: dict[str, list[SearchResult]] = {}
    for result in results:
        text = " ".join(result.content.split())
        if text in first:
            copies.setdefault(first[text].id, []).append(result)
        else:
            first[text] = result
            kept.append(result)
    return kept, copies
