"""PDF: one document per page with text (``page``, ``total_pages``, ``title``); a PDF without any text
(scanned) or with a password is refused naming the file."""

from __future__ import annotations

import io
import logging

from langchain_core.documents import Document
from pypdf import PdfReader

from ...errors import LoadError
from ..decode import normalize_newlines
from .base import ReadOptions, SourceFile, make_document

__all__ = ["PDF", "PdfFormat"]

logger = logging.getLogger(__name__)


class PdfFormat:
    """``.pdf`` files, read with pypdf."""

    binary = True

    def read(self, file: SourceFile, options: ReadOptions) -> list[Document]:
        """One document per page that has text."""
        path, data = file.path, file.data()

        try:
            reader = PdfReader(io.BytesIO(data))
            if reader.is_encrypted and not reader.decrypt(""):
                raise LoadError(path, "encrypted PDF (password required)")
            pages = list(reader.pages)
        except LoadError:
            raise
        except Exception as exc:
            raise LoadError(path, f"cannot read PDF: {exc}") from exc
        title: str | None = None
        try:
            info = reader.metadata
            if info is not None and isinstance(info.title, str) and info.title.strip():
                title = info.title.strip()
        except Exception:  # noqa: BLE001 - broken info dictionaries are common and harmless
            title = None
        docs: list[Document] = []
        for number, page in enumerate(pages, start=1):
            try:
                text = page.extract_text() or ""
            except Exception as exc:
                raise LoadError(path, f"cannot extract text from page {number}: {exc}") from exc
            text = normalize_newlines(text).strip()
            if not text:
                logger.debug("%s: page %d has no text", path, number)
                continue
            docs.append(
                make_document(
                    path, text, "pdf", f"p{number}", page=number, total_pages=len(pages), title=title
                )
            )
        if not docs:
            raise LoadError(path, "no extractable text (scanned PDF?)")
        return docs


PDF = PdfFormat()
