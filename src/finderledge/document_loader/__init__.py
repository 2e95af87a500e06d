"""Load files and folders into LangChain ``Document`` objects ("parent documents").

Every document carries the same core metadata so that the rest of FinderLedge (splitting, indexing,
citing) can treat all formats alike:

``source``             absolute path of the file (as walked, symlinks not resolved); bytes of a name that
                       are not UTF-8 appear as ``\\xNN`` escapes (see :func:`safe_path`)
``file_name``          base name of the file
``doc_type_detected``  "markdown", "text", "html", "json", "pdf", "csv", "docx" or "code"
``language``           only for ``doc_type_detected == "code"``: a ``langchain_text_splitters.Language``
                       value ("python", "js", "ts", ...)
``locator``            short string unique within the file: "p3" (PDF page 3), "r12" (CSV row 12),
                       "l5" (JSONL line 5), "i2" (item 2 of a JSON list) or "" for whole-file documents
``source_id``          ``f"{file_name}:{locator}"``, or just ``file_name`` when the locator is empty

Format-specific keys: ``page``/``total_pages`` (PDF), ``row`` (CSV), ``line`` (JSONL), ``item`` (JSON
list), ``title`` (HTML, DOCX and PDF when known), ``encoding`` (every format decoded from bytes).

Text decoding tries UTF-8 (with or without BOM) strictly, then the Japanese codecs Shift_JIS / CP932 /
EUC-JP when one decodes cleanly and the result looks like Japanese, then charset-normalizer.  See
``docs/formats.md`` for the full table and the error policy.

The package follows the data path: :mod:`.walk` (which files), :mod:`.decode` (bytes to text, a big file in
pieces), :mod:`.sniff` (what a file is), :mod:`.formats` (one reader per format, registered by extension in
:data:`FORMATS`, where you can register your own) and :mod:`.loader` (:class:`DocumentLoader`).
"""

from __future__ import annotations

from ..errors import LoadError
from ..metadata import clean_text
from .decode import decode_bytes, decode_stream
from .formats import FORMATS, FormatReader, ReadOptions, SourceFile, make_document
from .loader import DocumentLoader
from .paths import absolute_path, known_gone, safe_path
from .results import EmptyDocumentError, LoadResult, SkippedFile, UnsupportedFileError
from .sniff import CODE_LANGUAGES, SUPPORTED_EXTENSIONS, detect_doc_type, detect_language

__all__ = [
    "CODE_LANGUAGES",
    "FORMATS",
    "SUPPORTED_EXTENSIONS",
    "DocumentLoader",
    "EmptyDocumentError",
    "FormatReader",
    "LoadError",
    "LoadResult",
    "ReadOptions",
    "SkippedFile",
    "SourceFile",
    "UnsupportedFileError",
    "absolute_path",
    "clean_text",
    "decode_bytes",
    "decode_stream",
    "detect_doc_type",
    "detect_language",
    "known_gone",
    "make_document",
    "safe_path",
]
