"""Splits parent documents into child chunks with a LangChain splitter chosen by document type.

By default (``chunk_unit="weighted"``) chunk sizes are measured in "Latin-character equivalents": a CJK
character counts as :data:`CJK_CHAR_WEIGHT` characters, because embedding tokenizers spend about one
token per CJK character but one per three to four Latin characters.  So ``chunk_size=1000`` gives
chunks of about the same token count in Japanese and English.  ``chunk_unit="chars"`` counts every
character once, for sizes given in characters (``chunk_size=450`` gives Japanese chunks of up to 450).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, overload

from langchain_core.documents import Document
from langchain_text_splitters import (
    Language,
    RecursiveCharacterTextSplitter,
    RecursiveJsonSplitter,
    TextSplitter,
)

from ..config import CHUNK_UNITS
from ..metadata import FL_KEY, child_id

__all__ = [
    "CJK_CHAR_WEIGHT",
    "TEXT_SEPARATORS",
    "DocumentSplitter",
    "child_id",
    "chunk_context",
    "weighted_length",
]

logger = logging.getLogger(__name__)

CJK_CHAR_WEIGHT = 3
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f\uac00-\ud7af]")

# Paragraphs, lines, then sentence ends in Japanese and English, then clauses, words, characters.
TEXT_SEPARATORS = ["\n\n", "\n", "。", "！", "？", "!", "?", ". ", "；", "; ", "、", "，", ", ", " ", ""]
# PDF text breaks lines where the page did, mid-sentence: sentence ends come before single line breaks
PDF_SEPARATORS = [
    "\n\n",
    "。",
    "！",
    "？",
    "!",
    "?",
    ". ",
    ".\n",
    "\n",
    "；",
    "; ",
    "、",
    "，",
    ", ",
    " ",
    "",
]

# Markdown's structural separators (headings, fences, rules, paragraphs, lines), then sentence and clause
# ends as regexes that keep the mark with its sentence (。！？ are not followed by a space in Japanese)
MARKDOWN_SEPARATORS = [
    *RecursiveCharacterTextSplitter.get_separators_for_language(Language.MARKDOWN)[:-2],
    r"(?<=[。！？])",
    r"(?<=[!?.])\s+",
    r"(?<=[；、，])",
    r"(?<=[;,])\s+",
    " ",
    "",
]
_LANGUAGES = {lang.value: lang for lang in Language}
_MD_HEADER = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$")
_FENCE = re.compile(r"^[ \t]*(```|~~~)")


def markdown_headers(text: str) -> list[tuple[int, list[str]]]:
    """``(offset, [h1, h2, …])`` at each Markdown header outside code fences: the section path from there on."""
    out: list[tuple[int, list[str]]] = []
    path: list[tuple[int, str]] = []
    in_fence = False
    offset = 0
    for line in text.splitlines(keepends=True):
        if _FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence and (m := _MD_HEADER.match(line.rstrip("\r\n"))):
            level = len(m.group(1))
            path = [(lv, title) for lv, title in path if lv < level] + [(level, m.group(2))]
            out.append((offset, [title for _, title in path]))
        offset += len(line)
    return out


def _section_of(headers: list[tuple[int, list[str]]], position: int) -> str | None:
    """The header path in force at ``position`` (``"Title > Section"``), or ``None`` before any header."""
    current = None
    for offset, path in headers:
        if offset > position:
            break
        current = " > ".join(path)
    return current


CONTEXT_SEPARATOR = " > "  # between the title and the headings of a chunk's context
_HEADING_MARKS = re.compile(r"^[ \t]*#{1,6}[ \t]+|[ \t]*#*[ \t]*$")


def document_title(metadata: Mapping[str, Any]) -> str | None:
    """A parent's title: its ``title`` (front matter, HTML/PDF/DOCX, a BEIR corpus), else its ``file_name``."""
    for key in ("title", "file_name"):
        value = metadata.get(key)
        if isinstance(value, str) and value.strip():
            return " ".join(value.split())
    return None


def chunk_context(title: str | None, section: str | None, chunk: str) -> str | None:
    """The context carried into a chunk's embedded and BM25 text: ``Title > Heading > Subheading``, leaving
    out a part the chunk's first line already says (a BEIR chunk 0 starts with its title, a Markdown chunk
    with its own heading) and a first heading equal to the title; ``None`` when nothing is left."""
    headings = [h for h in section.split(CONTEXT_SEPARATOR) if h] if section else []
    if title and headings and headings[0] == title:
        headings = headings[1:]
    first = " ".join(_HEADING_MARKS.sub("", chunk.lstrip().split("\n", 1)[0]).split())
    kept = [p for p in ([title] if title else []) + headings if p != first]
    return CONTEXT_SEPARATOR.join(kept) or None


def weighted_length(text: str) -> int:
    """Length of ``text`` with CJK characters weighted by :data:`CJK_CHAR_WEIGHT`."""
    if text.isascii():  # no CJK character: a C-speed check instead of a regex scan (most English text)
        return len(text)
    return len(text) + (CJK_CHAR_WEIGHT - 1) * len(_CJK.findall(text))


class DocumentSplitter:
    """Splits each parent ``Document`` into children whose metadata follows FinderLedge's chunk schema."""

    def __init__(
        self,
        chunk_size: int = 1000,
        chunk_overlap: int = 100,
        chunk_unit: str = "weighted",
        chunk_context: bool = False,
    ) -> None:
        if chunk_size < 1 or not 0 <= chunk_overlap < chunk_size:
            raise ValueError(
                f"chunk_size/chunk_overlap: expected chunk_size >= 1 and 0 <= chunk_overlap < chunk_size, "
                f"got {chunk_size}/{chunk_overlap}"
            )
        if chunk_unit not in CHUNK_UNITS:
            raise ValueError(f"chunk_unit: expected one of {list(CHUNK_UNITS)}, got {chunk_unit!r}")
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap
        self.chunk_unit = chunk_unit
        # each chunk's metadata carries its parent's title and heading path (``context``) for the embedding and BM25
        self.chunk_context = chunk_context
        self.length_function: Callable[[str], int] = weighted_length if chunk_unit == "weighted" else len
        self._cache: dict[str, TextSplitter] = {}

    def splitter_for(self, doc_type: str, language: str | None = None) -> TextSplitter:
        """The LangChain splitter used for one document type (cached)."""
        key = f"{doc_type}:{language or ''}"
        if key not in self._cache:
            self._cache[key] = self._make(doc_type, language)
        return self._cache[key]

    def _make(self, doc_type: str, language: str | None) -> TextSplitter:
        common: dict[str, Any] = {
            "chunk_size": self.chunk_size,
            "chunk_overlap": self.chunk_overlap,
            "length_function": self.length_function,
        }
        lang: Language | None = None
        if doc_type == "markdown":
            return RecursiveCharacterTextSplitter(
                separators=MARKDOWN_SEPARATORS, is_separator_regex=True, **common
            )
        if doc_type == "html":
            lang = Language.HTML
        elif doc_type == "code" and language in _LANGUAGES:
            lang = _LANGUAGES[language]
        if lang is not None:
            return RecursiveCharacterTextSplitter.from_language(lang, **common)
        separators = PDF_SEPARATORS if doc_type == "pdf" else TEXT_SEPARATORS
        return RecursiveCharacterTextSplitter(separators=separators, keep_separator="end", **common)

    def split_text(self, text: str, doc_type: str = "text", language: str | None = None) -> list[str]:
        """Split one text; JSON is split along its structure, everything else by the type's separators."""
        if self.length_function(text) <= self.chunk_size:
            return [text] if text.strip() else []
        if doc_type == "json":
            chunks = self._split_json(text)
            if chunks is not None:
                return chunks
        if doc_type == "html" and "<" not in text:
            doc_type = "text"  # already-extracted visible text from an HTML file
        return [c for c in self.splitter_for(doc_type, language).split_text(text) if c.strip()]

    def _split_json(self, text: str) -> list[str] | None:
        try:
            data = json.loads(text)
        except ValueError:
            return None
        if not isinstance(data, (dict, list)):
            return None
        splitter = RecursiveJsonSplitter(max_chunk_size=self.chunk_size)
        try:
            chunks = splitter.split_text(
                data if isinstance(data, dict) else {str(i): v for i, v in enumerate(data)},
                convert_lists=True,
                ensure_ascii=False,
            )
        except Exception:
            logger.debug("JSON splitter failed; splitting as text", exc_info=True)
            return None
        text_splitter = self.splitter_for("text")
        out: list[str] = []
        for chunk in chunks:  # a single huge string value can still exceed the size
            out.extend(
                text_splitter.split_text(chunk) if self.length_function(chunk) > self.chunk_size else [chunk]
            )
        return [c for c in out if c.strip()]

    def split_windows(
        self, text: str, doc_type: str = "text", language: str | None = None, window: int = 1_000_000
    ) -> Iterator[list[str]]:
        """The chunks of a long ``text``, a window of about ``window`` characters at a time: memory holds one
        window's chunks, never all of them.  Each window is cut after a paragraph break (else a line break or
        a space); its last chunk, which the cut may have shortened, is split again at the start of the next
        window, so the chunks are those :meth:`split_text` gives for the whole text (the splitter merges
        pieces greedily from the left, overlap included)."""
        start = 0
        while start < len(text):
            end = len(text)
            if end - start > window:
                end = start + window
                for mark in ("\n\n", "\n", " "):
                    found = text.rfind(mark, start + window // 2, end)
                    if found >= 0:
                        end = found + len(mark)
                        break
            part = text[start:end]
            pieces = self.split_text(part, doc_type, language)
            if end < len(text) and len(pieces) > 1:
                restart = part.rfind(pieces[-1])
                if restart > 0:
                    yield pieces[:-1]
                    start += restart
                    continue
            yield pieces
            start = end

    @overload
    def split_document(
        self, parent: Document, *, doc_type: str | None = None, language: str | None = None
    ) -> list[Document]: ...

    @overload
    def split_document(
        self,
        parent: Document,
        parent_id: str,
        make_child_id: Callable[[str, int], str] = child_id,
        *,
        doc_type: str | None = None,
        language: str | None = None,
    ) -> tuple[Document, list[Document]]: ...

    def split_document(
        self,
        parent: Document,
        parent_id: str | None = None,
        make_child_id: Callable[[str, int], str] = child_id,
        *,
        doc_type: str | None = None,
        language: str | None = None,
    ) -> tuple[Document, list[Document]] | list[Document]:
        """Split one document.  ``split_document(doc)``, as the design writes it, returns the chunks
        (``List[Document]``); their parent id is ``doc.id``, or a hash of its ``source`` and text (as
        ``add_document`` gives a text), and each chunk's id is ``<parent id>-<index>``.  With a
        ``parent_id`` it returns the parent and its children, ids assigned by ``make_child_id``.  Either
        way FinderLedge's fields (``id``, ``parent_id``, ``split_index``, ``split_count``…) are under
        :data:`~finderledge.metadata.FL_KEY`; ``doc_type``/``language`` default to the loader's metadata."""
        pid = parent_id
        if pid is None:
            from ..ledgers.base import content_id  # the ledgers import more than a splitter needs

            pid = parent.id or content_id(str(parent.metadata.get("source") or ""), parent.page_content)
        parent_md, parts = self.split_parts(
            parent.page_content,
            parent.metadata,
            pid,
            make_child_id,
            doc_type=doc_type,
            language=language,
        )
        children = [Document(page_content=text, metadata=md, id=md[FL_KEY]["id"]) for text, md in parts]
        if parent_id is None:
            return children
        return Document(page_content=parent.page_content, metadata=parent_md, id=parent_id), children

    def split_parts(
        self,
        text: str,
        metadata: Mapping[str, Any],
        parent_id: str,
        make_child_id: Callable[[str, int], str],
        *,
        doc_type: str | None = None,
        language: str | None = None,
    ) -> tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]:
        """:meth:`split_document` as plain values: the parent's metadata and each child's ``(text, metadata)``
        (a bulk write needs no ``Document`` per chunk: each costs a pydantic validation)."""
        md = dict(metadata)
        doc_type = str(doc_type or md.get("doc_type_detected") or "text")
        if language is None and isinstance(md.get("language"), str):
            language = md["language"]
        pieces = self.split_text(text, doc_type, language)
        if not pieces and text.strip():
            pieces = [text]
        count = len(pieces)
        parent_md = {
            **md,
            FL_KEY: {"id": parent_id, "is_parent": True, "split_count": count, "doc_type": doc_type},
        }
        headers = markdown_headers(text) if doc_type == "markdown" else []
        title = document_title(md) if self.chunk_context else None
        cursor = 0
        children: list[tuple[str, dict[str, Any]]] = []
        for i, piece in enumerate(pieces):
            info: dict[str, Any] = {
                "id": make_child_id(parent_id, i),
                "is_parent": False,
                "parent_id": parent_id,
                "split_index": i,
                "split_count": count,
                "doc_type": doc_type,
            }
            section = None
            if headers:  # chunks come in order and may overlap: search from just after the last start
                found = text.find(piece, cursor)
                if found >= 0:
                    cursor = found + 1
                    section = _section_of(headers, found)
                    if section:
                        info["headers"] = section
            if self.chunk_context and (context := chunk_context(title, section, piece)):
                info["context"] = context
            children.append((piece, {**md, FL_KEY: info}))
        return parent_md, children
