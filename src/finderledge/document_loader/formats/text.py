"""Plain text, Markdown (front matter becomes metadata), source code, and files without an extension.

The file is decoded in pieces (:func:`~finderledge.document_loader.decode.decode_stream`): a big UTF-8 text
file is held once as text, never also as bytes or as a second copy of the text.
"""

from __future__ import annotations

from typing import Any

from langchain_core.documents import Document

from ..front_matter import split_front_matter
from ..paths import safe_path
from ..results import EmptyDocumentError
from ..sniff import CODE_LANGUAGES, EXTENSION_TYPES, LOADER_KEYS, detect_language, sniff_doc_type
from .base import ReadOptions, SourceFile, decode_file, make_document
from .html import html_to_text

__all__ = ["TEXT", "TextFormat"]


class TextFormat:
    """Text-like files: the extension decides the type ("text", "markdown", "code"), else the text is sniffed."""

    binary = False

    def read(self, file: SourceFile, options: ReadOptions) -> list[Document]:
        """One document holding the whole file."""
        path, suffix = file.path, file.suffix
        text, codec = decode_file(file, options.encoding)
        if not text or text.isspace():
            raise EmptyDocumentError(path, "empty file")
        doc_type = EXTENSION_TYPES.get(suffix) if suffix else None
        if doc_type is None:
            doc_type = sniff_doc_type(text)
            if doc_type == "html":
                body, title = html_to_text(text)
                return (
                    [make_document(path, body, "html", encoding=codec, title=title or None)] if body else []
                )
            language = detect_language(text) if doc_type == "code" else None
            return [make_document(path, text, doc_type, encoding=codec, language=language)]
        language = CODE_LANGUAGES.get(suffix)
        fields: dict[str, Any] = {}
        if doc_type == "markdown":  # YAML front matter: metadata, not text
            fields, text = split_front_matter(text, safe_path(path), LOADER_KEYS)
            if not text or text.isspace():
                raise EmptyDocumentError(path, "only front matter, no text")
        return [make_document(path, text, doc_type, fields=fields, encoding=codec, language=language)]


TEXT = TextFormat()
