"""The file formats the loader reads, one registry entry per extension.

:data:`FORMATS` maps an extension (lower case, with its dot) to a reader (see
:class:`~finderledge.document_loader.formats.base.FormatReader`); the built-in readers are imported on first
use.  Register your own to read another extension, or to read a built-in one your way::

    from finderledge.document_loader import FORMATS

    class RtfFormat:
        binary = False
        def read(self, file, options): ...

    FORMATS.register(".rtf", RtfFormat())
"""

from __future__ import annotations

from ...registry import Registry
from ..sniff import (
    CODE_LANGUAGES,
    CSV_EXTENSIONS,
    HTML_EXTENSIONS,
    JSON_EXTENSIONS,
    JSONL_EXTENSIONS,
    MARKDOWN_EXTENSIONS,
    TEXT_EXTENSIONS,
)
from .base import FormatReader, ReadOptions, SourceFile, make_document
from .text import TEXT

__all__ = ["EXTENSIONLESS", "FORMATS", "FormatReader", "ReadOptions", "SourceFile", "make_document"]

#: extension -> reader; the setting that chooses among them is a file's extension
FORMATS: Registry[FormatReader] = Registry("file format", "file extension")

#: the reader of a file without an extension (its type is sniffed from the text)
EXTENSIONLESS: FormatReader = TEXT

_HERE = __name__
for _suffix in sorted(TEXT_EXTENSIONS | MARKDOWN_EXTENSIONS | set(CODE_LANGUAGES)):
    FORMATS.register(_suffix, TEXT)
for _suffix in sorted(HTML_EXTENSIONS):
    FORMATS.register(_suffix, f"{_HERE}.html:HTML")
for _suffix in sorted(JSON_EXTENSIONS):
    FORMATS.register(_suffix, f"{_HERE}.structured:JSON")
for _suffix in sorted(JSONL_EXTENSIONS):
    FORMATS.register(_suffix, f"{_HERE}.structured:JSONL")
for _suffix in sorted(CSV_EXTENSIONS):
    FORMATS.register(_suffix, f"{_HERE}.csv_rows:CSV")
FORMATS.register(".pdf", f"{_HERE}.pdf:PDF")
FORMATS.register(".docx", f"{_HERE}.docx:DOCX")
