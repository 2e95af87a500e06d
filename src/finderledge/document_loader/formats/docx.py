"""DOCX: one document of the paragraphs and tables (cells " | "), in document order, titled."""

from __future__ import annotations

import io

import docx
from docx.table import Table
from langchain_core.documents import Document

from ...errors import LoadError
from .base import ReadOptions, SourceFile, make_document

__all__ = ["DOCX", "DocxFormat"]


class DocxFormat:
    """``.docx`` files, read with python-docx."""

    binary = True

    def read(self, file: SourceFile, options: ReadOptions) -> list[Document]:
        """One document of the whole text (none when it has no text)."""
        path, data = file.path, file.data()

        try:
            document = docx.Document(io.BytesIO(data))
        except Exception as exc:
            raise LoadError(path, f"cannot read DOCX: {type(exc).__name__}: {exc}") from exc
        lines: list[str] = []
        for block in document.iter_inner_content():
            if isinstance(block, Table):
                for row in block.rows:
                    cells: list[str] = []
                    seen: set[int] = set()
                    for cell in row.cells:
                        if id(cell._tc) in seen:  # merged cells repeat; keep one
                            continue
                        seen.add(id(cell._tc))
                        cells.append(" ".join(cell.text.split()))
                    while cells and not cells[-1]:
                        cells.pop()
                    if cells:
                        lines.append(" | ".join(cells))
            else:
                text = block.text.strip()
                if text:
                    lines.append(text)
        title = (document.core_properties.title or "").strip() or None
        text = "\n".join(lines)
        return [make_document(path, text, "docx", title=title)] if text else []


DOCX = DocxFormat()
