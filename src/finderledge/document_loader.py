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
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import logging
import os
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Literal

from langchain_core.documents import Document

__all__ = [
    "CODE_LANGUAGES",
    "SUPPORTED_EXTENSIONS",
    "DocumentLoader",
    "EmptyDocumentError",
    "LoadError",
    "LoadResult",
    "SkippedFile",
    "UnsupportedFileError",
    "clean_text",
    "decode_bytes",
    "detect_doc_type",
    "detect_language",
    "known_gone",
    "safe_path",
]

from .errors import LoadError
from .front_matter import split_front_matter
from .metadata import clean_text
from .progress import logged

logger = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------------
# Format tables
# --------------------------------------------------------------------------------------------------

#: Extension -> ``langchain_text_splitters.Language`` value, for files that get ``doc_type "code"``.
CODE_LANGUAGES: dict[str, str] = {
    ".py": "python",
    ".pyi": "python",
    ".pyw": "python",
    ".js": "js",
    ".jsx": "js",
    ".mjs": "js",
    ".cjs": "js",
    ".ts": "ts",
    ".tsx": "ts",
    ".mts": "ts",
    ".cts": "ts",
    ".java": "java",
    ".go": "go",
    ".rs": "rust",
    ".c": "c",
    ".h": "c",
    ".cpp": "cpp",
    ".cc": "cpp",
    ".cxx": "cpp",
    ".c++": "cpp",
    ".hpp": "cpp",
    ".hh": "cpp",
    ".hxx": "cpp",
    ".cs": "csharp",
    ".rb": "ruby",
    ".php": "php",
    ".kt": "kotlin",
    ".kts": "kotlin",
    ".scala": "scala",
    ".sc": "scala",
    ".swift": "swift",
    ".sol": "sol",
    ".lua": "lua",
    ".pl": "perl",
    ".pm": "perl",
    ".hs": "haskell",
    ".lhs": "haskell",
    ".proto": "proto",
    ".r": "r",
    ".tex": "latex",
    ".ex": "elixir",
    ".exs": "elixir",
    ".ps1": "powershell",
    ".psm1": "powershell",
    ".cob": "cobol",
    ".cbl": "cobol",
}

#: Source/config files without a LangChain splitter: loaded as plain text (``doc_type "text"``).
_PLAIN_CODE_EXTENSIONS = frozenset(
    {
        ".sh",
        ".bash",
        ".zsh",
        ".fish",
        ".bat",
        ".cmd",
        ".sql",
        ".yaml",
        ".yml",
        ".toml",
        ".ini",
        ".cfg",
        ".conf",
        ".properties",
        ".css",
        ".scss",
        ".sass",
        ".less",
        ".xml",
        ".gradle",
        ".cmake",
        ".mk",
        ".dockerfile",
        ".vue",
        ".svelte",
        ".dart",
        ".m",
        ".jl",
        ".clj",
        ".erl",
        ".f90",
        ".groovy",
        ".graphql",
    }
)

_TEXT_EXTENSIONS = frozenset({".txt", ".text", ".rst", ".log"}) | _PLAIN_CODE_EXTENSIONS
# the metadata keys the loader (and FinderLedge) set: front matter does not override them
_LOADER_KEYS = frozenset(
    {
        "source",
        "file_name",
        "doc_type_detected",
        "locator",
        "source_id",
        "encoding",
        "language",
        "page",
        "row",
    }
    | {"_finderledge", "document_id"}
)
_MARKDOWN_EXTENSIONS = frozenset({".md", ".markdown", ".mdown", ".mkd"})
_HTML_EXTENSIONS = frozenset({".html", ".htm", ".xhtml"})
_JSON_EXTENSIONS = frozenset({".json"})
_JSONL_EXTENSIONS = frozenset({".jsonl", ".ndjson"})
_CSV_EXTENSIONS = frozenset({".csv", ".tsv"})

_EXTENSION_TYPES: dict[str, str] = {
    **{e: "text" for e in _TEXT_EXTENSIONS},
    **{e: "markdown" for e in _MARKDOWN_EXTENSIONS},
    **{e: "html" for e in _HTML_EXTENSIONS},
    **{e: "json" for e in _JSON_EXTENSIONS | _JSONL_EXTENSIONS},
    **{e: "csv" for e in _CSV_EXTENSIONS},
    **{e: "code" for e in CODE_LANGUAGES},
    ".pdf": "pdf",
    ".docx": "docx",
}

#: Every extension the loader accepts (files without an extension are accepted when they are text).
SUPPORTED_EXTENSIONS: frozenset[str] = frozenset(_EXTENSION_TYPES)

#: Metadata keys set by the loader; JSON fields with these names are stored as ``json_<name>`` so they
#: never overwrite or get overwritten.
_RESERVED_KEYS = frozenset(
    {
        "source",
        "file_name",
        "doc_type_detected",
        "language",
        "locator",
        "source_id",
        "encoding",
        "page",
        "total_pages",
        "row",
        "line",
        "item",
        "title",
        "_finderledge",
        "document_id",
    }
)

_BINARY_SNIFF_BYTES = 8192
_SHEBANG_LANGUAGES = {
    "python": "python",
    "python3": "python",
    "python2": "python",
    "node": "js",
    "nodejs": "js",
    "deno": "ts",
    "ruby": "ruby",
    "perl": "perl",
    "php": "php",
    "lua": "lua",
    "runghc": "haskell",
    "runhaskell": "haskell",
    "Rscript": "r",
    "pwsh": "powershell",
    "elixir": "elixir",
}


# --------------------------------------------------------------------------------------------------
# Public result and error types
# --------------------------------------------------------------------------------------------------


@dataclass
class SkippedFile:
    """A file that produced no documents, and why.

    ``kind`` is one of "unsupported", "binary", "empty" (nothing to index: empty file, header-only CSV),
    "symlink" (not followed) or "error" (corrupt or unreadable file of a supported type, unlistable directory).
    """

    path: str
    reason: str
    kind: str = "error"


@dataclass
class LoadResult:
    """Documents from one ``load``/``load_directory`` call plus an account of every file considered."""

    documents: list[Document] = field(default_factory=list)
    skipped: list[SkippedFile] = field(default_factory=list)
    files_seen: int = 0
    files_loaded: int = 0  # files that produced at least one document
    files: dict[str, list[Document]] = field(default_factory=dict)  # absolute path -> its documents


class UnsupportedFileError(LoadError):
    """The file type is not supported (unknown extension or binary content)."""


class EmptyDocumentError(LoadError):
    """The file is readable but holds nothing to index (empty file, CSV with only a header, ...)."""


# --------------------------------------------------------------------------------------------------
# Encoding detection
# --------------------------------------------------------------------------------------------------

_JAPANESE_CODECS = ("shift_jis", "cp932", "euc_jp")
_SCORE_SAMPLE_CHARS = 65536  # scoring looks at a prefix; the strict decode still covers every byte
_PREFERRED_ON_TIE = ("utf-8", "cp1252", "iso8859-1", "iso8859-15")


def _japanese_score(text: str) -> float | None:
    """Score how much ``text`` looks like Japanese; None when it clearly does not (mojibake, controls)."""
    kana = kanji = punct = halfwidth = other = 0
    for ch in text:
        o = ord(ch)
        if o < 0x80:
            if o < 0x20 and ch not in "\t\n\r\f\v" or o == 0x7F:
                return None
            continue
        if 0x3041 <= o <= 0x30FF:
            kana += 1
        elif 0x4E00 <= o <= 0x9FFF or 0x3400 <= o <= 0x4DBF:
            kanji += 1
        elif (
            0x3000 <= o <= 0x303F
            or 0xFF01 <= o <= 0xFF60
            or 0xFFE0 <= o <= 0xFFEF
            or 0x2010 <= o <= 0x22FF
            or 0x2460 <= o <= 0x25FF
            or 0x3200 <= o <= 0x33FF
            or o in (0xA7, 0xA8, 0xB0, 0xB1, 0xB4, 0xB6, 0xD7, 0xF7)
        ):
            punct += 1
        elif 0xFF61 <= o <= 0xFF9F:
            halfwidth += 1
        else:
            other += 1
    non_ascii = kana + kanji + punct + halfwidth + other
    if non_ascii == 0 or kana + kanji == 0:
        return None
    if (kana + kanji + punct) / non_ascii < 0.8:
        return None
    return 2.0 * kana + kanji + punct - 2.0 * halfwidth - 3.0 * other


def _decode_japanese(data: bytes) -> tuple[str, str] | None:
    """Best clean Japanese decode of ``data`` as (text, codec), or None."""
    if b"\x1b$B" in data or b"\x1b$@" in data:
        try:
            return data.decode("iso2022_jp"), "iso2022_jp"
        except UnicodeDecodeError:
            pass
    decoded: dict[str, str] = {}
    best: tuple[float, str] | None = None
    for codec in _JAPANESE_CODECS:
        try:
            text = data.decode(codec)
        except UnicodeDecodeError:
            continue
        decoded[codec] = text
        score = _japanese_score(text[:_SCORE_SAMPLE_CHARS])
        if score is not None and (best is None or score > best[0]):
            best = (score, codec)
    if best is None:
        return None
    codec = best[1]
    # Shift_JIS and CP932 share most bytes but map a few differently (0x8160 is U+301C in Shift_JIS,
    # U+FF5E in CP932; NEC specials such as "①" exist only in CP932).  Files written on Windows are CP932,
    # so when both decode and disagree, CP932 wins.
    if codec == "shift_jis" and "cp932" in decoded and decoded["cp932"] != decoded["shift_jis"]:
        codec = "cp932"
    return decoded[codec], codec


def _normalize_codec(name: str) -> str:
    try:
        return codecs.lookup(name).name
    except LookupError:
        return name


def decode_bytes(data: bytes, encoding: str | None = None) -> tuple[str, str]:
    """Decode ``data`` to text and return ``(text, encoding)``; raise ``UnicodeError`` when impossible.

    Order: forced ``encoding`` (strict) > BOM (UTF-8/16/32, BOM stripped) > strict UTF-8 > a clean
    Shift_JIS/CP932/EUC-JP decode that looks like Japanese > charset-normalizer.
    """
    if encoding is not None:
        text = data.decode(encoding)
        text = text.removeprefix("\ufeff")
        return text, _normalize_codec(encoding)
    for bom, codec in (
        (codecs.BOM_UTF8, "utf-8-sig"),
        (codecs.BOM_UTF32_LE, "utf-32"),
        (codecs.BOM_UTF32_BE, "utf-32"),
        (codecs.BOM_UTF16_LE, "utf-16"),
        (codecs.BOM_UTF16_BE, "utf-16"),
    ):
        if data.startswith(bom):
            try:
                return data.decode(codec), codec
            except UnicodeDecodeError:
                break
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    japanese = _decode_japanese(data)
    if japanese is not None:
        return japanese
    from charset_normalizer import from_bytes

    matches = from_bytes(data)
    best = matches.best()
    if best is None:
        raise UnicodeError("cannot determine the text encoding")
    # charset-normalizer often ties cp1250/cp1252 on Western text and then picks by list order;
    # among equally good candidates prefer the far more common Western encodings.
    tied = {
        _normalize_codec(m.encoding): m
        for m in matches
        if abs(m.chaos - best.chaos) < 1e-6 and m.coherence >= best.coherence - 1e-6
    }
    for codec in _PREFERRED_ON_TIE:
        if codec in tied:
            return str(tied[codec]), codec
    return str(best), _normalize_codec(best.encoding)


def _looks_binary(head: bytes) -> bool:
    """NUL bytes in the first 8 KiB mean binary, except for UTF-16/32 text with a BOM."""
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return False
    return b"\x00" in head[:_BINARY_SNIFF_BYTES]


# --------------------------------------------------------------------------------------------------
# Type and language detection
# --------------------------------------------------------------------------------------------------

_MD_FENCE = re.compile(r"^\s{0,3}(```|~~~)", re.MULTILINE)
_MD_HEADER = re.compile(r"^\s{0,3}#{1,6}\s+\S", re.MULTILINE)
_MD_SETEXT = re.compile(r"^\S.*\n(=+|-+)\s*$", re.MULTILINE)
_HTML_DOC = re.compile(r"<!doctype\s+html|<html[\s>]|<head[\s>]|<body[\s>]", re.IGNORECASE)
_PY_STRONG = re.compile(
    r"^\s*(?:async\s+)?def\s+\w+\s*\(.*$|^\s*class\s+\w+\s*(?:\(.*\))?\s*:|^if\s+__name__\s*==",
    re.MULTILINE,
)
_PY_IMPORT = re.compile(r"^(?:import\s+[\w.]+(?:\s+as\s+\w+)?\s*$|from\s+[\w.]+\s+import\s+\S)", re.MULTILINE)
_SHEBANG = re.compile(r"^#!\s*(\S+)(?:\s+(\S+))?")


def _shebang_language(text: str) -> str | None:
    match = _SHEBANG.match(text)
    if not match:
        return None
    program = match.group(1).rsplit("/", 1)[-1]
    if program == "env" and match.group(2):
        program = match.group(2)
    program = re.sub(r"[\d.]+$", "", program) or program
    return _SHEBANG_LANGUAGES.get(program) or _SHEBANG_LANGUAGES.get(program + "3")


def _looks_like_python(text: str) -> bool:
    strong = len(_PY_STRONG.findall(text))
    imports = len(_PY_IMPORT.findall(text))
    return strong + imports >= 2 or (strong >= 1 and not _MD_HEADER.search(text))


def _sniff_doc_type(text: str) -> str:
    stripped = text.strip()
    if not stripped:
        return "text"
    if stripped[0] in "{[":
        try:
            if isinstance(json.loads(stripped), (dict, list)):
                return "json"
        except ValueError:
            pass
    if _HTML_DOC.search(stripped[:4096]):
        return "html"
    if _shebang_language(stripped) is not None:
        return "code"
    if _MD_FENCE.search(text):
        return "markdown"
    if _looks_like_python(text):
        return "code"
    if _MD_HEADER.search(text) or _MD_SETEXT.search(text):
        return "markdown"
    return "text"


def _suffix(path: str | Path) -> str:
    return Path(path).suffix.lower()


def detect_doc_type(path: str | Path | None, text: str) -> str:
    """Return the ``doc_type_detected`` value for a file path and/or its text.

    A known extension decides (".md" -> "markdown", ".py" -> "code", ".sql" -> "text", ...).  Without a
    path (raw strings) or with an unknown/missing extension the text is sniffed: "json" if it parses as
    an object/array, "html" for an HTML document, "code" for a shebang or obvious Python, "markdown"
    for headers or code fences, else "text".  Pair with :func:`detect_language` for the language.
    """
    if path is not None:
        doc_type = _EXTENSION_TYPES.get(_suffix(path))
        if doc_type is not None:
            return doc_type
    return _sniff_doc_type(text)


def detect_language(text: str, path: str | Path | None = None) -> str | None:
    """Return the ``langchain_text_splitters.Language`` value for code, or None when it is not code.

    The extension decides when ``path`` has a code extension; otherwise a shebang line or obvious
    Python (``def``/``class``/``import`` lines) is recognised.  ``detect_language(t, p)`` is not None
    exactly when ``detect_doc_type(p, t) == "code"``.
    """
    if path is not None:
        suffix = _suffix(path)
        if suffix in CODE_LANGUAGES:
            return CODE_LANGUAGES[suffix]
        if suffix in _EXTENSION_TYPES:
            return None
    if _sniff_doc_type(text) != "code":
        return None
    return _shebang_language(text.lstrip()) or "python"


# --------------------------------------------------------------------------------------------------
# HTML text extraction
# --------------------------------------------------------------------------------------------------

_HTML_SKIP = frozenset({"script", "style", "noscript", "template"})
_HTML_BLOCK = frozenset(
    {
        "address",
        "article",
        "aside",
        "blockquote",
        "body",
        "br",
        "caption",
        "dd",
        "details",
        "dialog",
        "div",
        "dl",
        "dt",
        "fieldset",
        "figcaption",
        "figure",
        "footer",
        "form",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "header",
        "hr",
        "html",
        "li",
        "main",
        "nav",
        "ol",
        "p",
        "pre",
        "section",
        "summary",
        "table",
        "tbody",
        "td",
        "tfoot",
        "th",
        "thead",
        "tr",
        "ul",
    }
)
_HTML_VOID = frozenset(
    {
        "area",
        "base",
        "br",
        "col",
        "embed",
        "hr",
        "img",
        "input",
        "link",
        "meta",
        "param",
        "source",
        "track",
        "wbr",
    }
)


_PRE_PROTECT = str.maketrans({"\n": "\x00", " ": "\x01", "\t": "\x02"})
_PRE_RESTORE = str.maketrans({"\x00": "\n", "\x01": " ", "\x02": "\t"})


class _HTMLTextExtractor(HTMLParser):
    """Collect visible text; block elements become line breaks, cells are separated by " | "."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title_parts: list[str] = []
        self._skip_depth = 0
        self._in_title = False
        self._pre_depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
            return
        if tag in _HTML_SKIP:
            self._skip_depth += 1
            return
        if self._skip_depth:
            return
        if tag == "pre":
            self._pre_depth += 1
        if tag in ("td", "th"):
            self.parts.append(" | ")
        elif tag in _HTML_BLOCK:
            self.parts.append("\n")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _HTML_BLOCK and not self._skip_depth:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
            return
        if tag in _HTML_SKIP:
            self._skip_depth = max(0, self._skip_depth - 1)
            return
        if self._skip_depth:
            return
        if tag == "pre":
            self._pre_depth = max(0, self._pre_depth - 1)
        if tag in _HTML_BLOCK and tag not in _HTML_VOID and tag not in ("td", "th"):
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title_parts.append(data)
        elif not self._skip_depth:
            if self._pre_depth:  # protect whitespace inside <pre> from the line clean-up
                self.parts.append(data.translate(_PRE_PROTECT))
            else:
                self.parts.append(data)

    def text(self) -> str:
        lines: list[str] = []
        for raw in "".join(self.parts).split("\n"):
            line = re.sub(r"[ \t\r\f\v\u00a0]+", " ", raw).strip()
            line = re.sub(r"^\|\s*", "", line)
            line = line.translate(_PRE_RESTORE)
            if line:
                lines.append(line)
        return "\n".join(lines).strip()

    def title(self) -> str:
        return re.sub(r"\s+", " ", "".join(self.title_parts)).strip()


def _html_to_text(html: str) -> tuple[str, str]:
    """Visible text and title of an HTML document."""
    parser = _HTMLTextExtractor()
    parser.feed(html)
    parser.close()
    return parser.text(), parser.title()


_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)


# --------------------------------------------------------------------------------------------------
# Glob matching for include/exclude
# --------------------------------------------------------------------------------------------------


def _glob_to_regex(pattern: str) -> re.Pattern[str]:
    """Translate a glob with ``**`` support into a regex matched against a POSIX relative path.

    ``**/`` matches zero or more directories, a trailing ``/**`` matches the directory itself and
    everything below it, ``*`` and ``?`` never cross "/", ``[...]`` classes are kept.
    """
    pat = pattern.replace("\\", "/").lstrip("/")
    pat = pat.removeprefix("./")
    out: list[str] = []
    i, n = 0, len(pat)
    while i < n:
        if pat.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pat.startswith("/**", i) and i + 3 == n:
            out.append("(?:/.*)?")
            i += 3
        elif pat.startswith("**", i):
            out.append(".*")
            i += 2
        elif pat[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pat[i] == "?":
            out.append("[^/]")
            i += 1
        elif pat[i] == "[":
            end = pat.find("]", i + 2)
            if end == -1:
                out.append(re.escape(pat[i]))
                i += 1
            else:
                body = pat[i + 1 : end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end + 1
        else:
            out.append(re.escape(pat[i]))
            i += 1
    return re.compile("".join(out) + r"\Z", re.DOTALL)


class _PatternSet:
    """Glob patterns; one without "/" matches a name at any depth (like .gitignore)."""

    def __init__(self, patterns: Sequence[str] | None) -> None:
        if isinstance(patterns, str):
            patterns = [patterns]
        self.patterns = list(patterns or [])
        self._compiled = [(_glob_to_regex(p), "/" not in p.strip("/")) for p in self.patterns]

    def __bool__(self) -> bool:
        return bool(self._compiled)

    def matches(self, rel_path: str) -> bool:
        name = rel_path.rsplit("/", 1)[-1]
        for regex, name_only in self._compiled:
            if regex.match(rel_path) or (name_only and regex.match(name)):
                return True
        return False


# --------------------------------------------------------------------------------------------------
# The loader
# --------------------------------------------------------------------------------------------------


def _scalar_metadata(obj: dict[str, Any], skip: str) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    for key, value in obj.items():
        if key == skip or value is None or not isinstance(value, (str, int, float, bool)):
            continue
        name = f"json_{key}" if key in _RESERVED_KEYS else str(key)
        meta[name] = value
    return meta


def _field_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def absolute_path(path: str | os.PathLike[str]) -> Path:
    """Absolute, normalised path ("a/../b" -> "/cwd/b", "~" expanded) without resolving symlinks."""
    return Path(os.path.abspath(os.path.expanduser(os.fspath(path))))


def safe_path(path: str | os.PathLike[str]) -> str:
    r"""A path as a storable string: name bytes that are not UTF-8 become ``\xNN`` escapes.

    A name read from disk that is not UTF-8 holds lone surrogates (``surrogateescape``), which SQLite,
    JSON and log files refuse; the escaped form is valid Unicode and :func:`known_gone` maps it back."""
    text = os.fspath(path)
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    try:
        return os.fsencode(text).decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # lone surrogates that stand for no bytes: not a name read from disk
        return clean_text(text, "path")


def _disk_paths(source: str) -> list[str]:
    r"""The paths a stored source may stand for: itself and, when it has ``\xNN`` escapes, the raw bytes."""
    paths = [source]
    if "\\x" in source:
        raw = re.sub(rb"\\x([0-9a-f]{2})", lambda m: bytes([int(m.group(1), 16)]), source.encode("utf-8"))
        paths.append(os.fsdecode(raw))
    return paths


def known_gone(source: str) -> bool:
    """True only when the file of a stored source surely no longer exists (not merely unreadable now)."""
    for path in _disk_paths(source):
        try:
            os.stat(path)
            return False
        except (FileNotFoundError, NotADirectoryError):
            continue
        except (OSError, ValueError):  # permission denied, I/O error ...: unknown, so not gone
            return False
    return True


def _normalize_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


class DocumentLoader:
    """Turn files and directories into parent ``Document`` objects with uniform metadata.

    ``include``/``exclude`` are glob patterns (``**`` supported) matched against the path relative to
    the loaded directory; a pattern without "/" also matches a bare file name at any depth.  Hidden
    files and directories are skipped unless ``include_hidden`` is True.  ``on_error`` decides what a
    corrupt file of a supported type does inside a directory load: "raise" raises ``LoadError``, "skip"
    records it in ``LoadResult.skipped`` (so does a directory that cannot be listed).  Unsupported, binary
    and empty files are always recorded as skipped in directory loads.  Symlinks inside a directory are
    followed only with ``follow_symlinks=True`` (each real file and directory once); otherwise they are
    recorded as skipped.
    """

    def __init__(
        self,
        *,
        include: Sequence[str] | None = None,
        exclude: Sequence[str] | None = None,
        on_error: Literal["raise", "skip"] = "skip",
        json_text_field: str | None = None,
        encoding: str | None = None,
        show_progress: bool | None = None,
        include_hidden: bool = False,
        follow_symlinks: bool = False,
    ) -> None:
        if on_error not in ("raise", "skip"):
            raise ValueError(f"on_error must be 'raise' or 'skip', not {on_error!r}")
        if encoding is not None:
            codecs.lookup(encoding)  # fail early on an unknown codec name
        self.include = _PatternSet(include)
        self.exclude = _PatternSet(exclude)
        self.on_error = on_error
        self.json_text_field = json_text_field
        self.encoding = encoding
        self.show_progress = show_progress
        self.include_hidden = include_hidden
        self.follow_symlinks = follow_symlinks

    # ------------------------------------------------------------------ public API

    @staticmethod
    def is_supported(path: str | Path) -> bool:
        """True for a known extension, or an extensionless file whose first 8 KiB hold no NUL byte."""
        p = Path(path)
        suffix = p.suffix.lower()
        if suffix:
            return suffix in SUPPORTED_EXTENSIONS
        try:
            with open(p, "rb") as fh:
                return not _looks_binary(fh.read(_BINARY_SNIFF_BYTES))
        except (OSError, ValueError):  # ValueError: a NUL byte or an unencodable character in the name
            return False

    def load(self, path: str | Path) -> LoadResult:
        """Load a file or a directory; a single file is accounted for exactly like one in a folder."""
        p = absolute_path(path)
        if p.is_dir():
            return self.load_directory(p)
        if not p.exists():
            raise LoadError(p, "no such file or directory")
        result = LoadResult()
        self._load_into(result, p)
        return result

    def load_directory(self, path: str | Path) -> LoadResult:
        """Recursively load a directory in sorted order, honouring include/exclude and ``on_error``."""
        root = absolute_path(path)
        if not root.is_dir():
            raise LoadError(root, "not a directory")
        result = LoadResult()
        files = _Walker(self, root, result.skipped).files()
        for file_path in self._progress(files):
            self._load_into(result, file_path)
        logger.info(
            "loaded %d documents from %d of %d files under %s (%d skipped)",
            len(result.documents),
            result.files_loaded,
            result.files_seen,
            root,
            len(result.skipped),
        )
        return result

    def iter_load(self, path: str | Path, result: LoadResult) -> Iterator[tuple[str, list[Document]]]:
        """Load a file or a directory one file at a time, so a caller can process a large folder in bounded
        memory: yields ``(source, documents)`` per loaded file and accounts for every file in ``result``
        (``files_seen``, ``files_loaded``, ``skipped``; its ``files`` and ``documents`` stay empty)."""
        p = absolute_path(path)
        if p.is_dir():
            files = _Walker(self, p, result.skipped).files()
        elif p.exists():
            files = [p]
        else:
            raise LoadError(p, "no such file or directory")
        for file_path in self._progress(files, "Indexing files") if p.is_dir() else files:
            loaded = self._load_one(result, file_path)
            if loaded is not None:
                yield loaded

    def load_file(self, path: str | Path) -> list[Document]:
        """Load one file; raise ``UnsupportedFileError``, ``EmptyDocumentError`` or ``LoadError``."""
        p = absolute_path(path)
        if p.is_dir():
            raise LoadError(p, "is a directory (use load_directory)")
        try:
            data = p.read_bytes()
        except FileNotFoundError:
            raise LoadError(p, "no such file") from None
        except OSError as exc:
            raise LoadError(p, f"cannot read file: {exc.strerror or exc}") from exc
        suffix = p.suffix.lower()
        if suffix and suffix not in SUPPORTED_EXTENSIONS:
            raise UnsupportedFileError(p, f"unsupported file type '{suffix}'")
        if not data.strip():
            raise EmptyDocumentError(p, "empty file")
        if suffix not in (".pdf", ".docx") and _looks_binary(data[:_BINARY_SNIFF_BYTES]):
            raise UnsupportedFileError(p, "binary file")
        try:
            docs = self._dispatch(p, suffix, data)
        except LoadError:
            raise
        except Exception as exc:  # parser bugs and odd inputs: report them against the file
            raise LoadError(p, f"{type(exc).__name__}: {exc}") from exc
        if not docs:
            raise EmptyDocumentError(p, "no text content")
        return docs

    # ------------------------------------------------------------------ directory walking

    def _progress(self, files: list[Path], desc: str = "Loading files") -> Any:
        """``files``, wrapped in a progress bar (files/s and ETA) when ``show_progress`` asks for one."""
        show = self.show_progress
        if show is None:
            show = bool(getattr(sys.stderr, "isatty", lambda: False)())
        if not show:  # no bar: a log line every few seconds of a long walk
            return logged(files, desc.lower(), "file")
        from tqdm.auto import tqdm

        return tqdm(files, desc=desc, unit="file")

    def _load_into(self, result: LoadResult, path: Path) -> None:
        """Load one file into ``result``, applying the skip/raise policy."""
        loaded = self._load_one(result, path)
        if loaded is not None:
            result.files[loaded[0]] = loaded[1]
            result.documents.extend(loaded[1])

    def _load_one(self, result: LoadResult, path: Path) -> tuple[str, list[Document]] | None:
        """One file's ``(source, documents)``, or None for a skipped file (recorded in ``result``)."""
        key = safe_path(path)
        result.files_seen += 1
        try:
            docs = self.load_file(path)
        except UnsupportedFileError as exc:
            kind = "binary" if exc.reason == "binary file" else "unsupported"
            logger.info("skipping %s: %s", key, exc.reason)
            result.skipped.append(SkippedFile(key, exc.reason, kind))
            return None
        except EmptyDocumentError as exc:
            logger.info("skipping %s: %s", key, exc.reason)
            result.skipped.append(SkippedFile(key, exc.reason, "empty"))
            return None
        except LoadError as exc:
            if self.on_error == "raise":
                if key != str(path):
                    raise LoadError(key, exc.reason) from exc
                raise
            logger.warning("skipping %s: %s", key, exc.reason)
            result.skipped.append(SkippedFile(key, exc.reason, "error"))
            return None
        result.files_loaded += 1
        return key, docs

    # ------------------------------------------------------------------ per-format loaders

    def _decode(self, path: Path, data: bytes, encoding: str | None = None) -> tuple[str, str]:
        try:
            text, codec = decode_bytes(data, encoding or self.encoding)
        except (UnicodeError, LookupError) as exc:
            forced = encoding or self.encoding
            what = f"not valid {forced}" if forced else "cannot determine the text encoding"
            raise LoadError(path, f"{what} ({exc})") from exc
        return _normalize_newlines(text), codec

    @staticmethod
    def _make(
        path: Path,
        text: str,
        doc_type: str,
        locator: str = "",
        fields: dict[str, Any] | None = None,
        **extra: Any,
    ) -> Document:
        """Build a Document with the core metadata plus ``fields``/``extra`` (None values dropped).

        Lone surrogates (JSON can escape them) are replaced with U+FFFD in the text and string values."""
        name = safe_path(path.name)
        where = safe_path(path)
        text = clean_text(text, where)
        metadata: dict[str, Any] = {
            "source": safe_path(path),
            "file_name": name,
            "doc_type_detected": doc_type,
            "locator": locator,
            "source_id": f"{name}:{locator}" if locator else name,
        }
        for key, value in {**(fields or {}), **extra}.items():
            if value is not None:
                metadata[key] = clean_text(value, where) if isinstance(value, str) else value
        return Document(page_content=text, metadata=metadata)

    def _dispatch(self, path: Path, suffix: str, data: bytes) -> list[Document]:
        if suffix == ".pdf":
            return self._load_pdf(path, data)
        if suffix == ".docx":
            return self._load_docx(path, data)
        if suffix in _CSV_EXTENSIONS:
            return self._load_csv(path, suffix, data)
        if suffix in _HTML_EXTENSIONS:
            return self._load_html(path, data)
        if suffix in _JSON_EXTENSIONS:
            return self._load_json(path, data)
        if suffix in _JSONL_EXTENSIONS:
            return self._load_jsonl(path, data)
        text, codec = self._decode(path, data)
        if not text.strip():
            raise EmptyDocumentError(path, "empty file")
        if not suffix:
            doc_type = _sniff_doc_type(text)
            if doc_type == "html":
                body, title = _html_to_text(text)
                return [self._make(path, body, "html", encoding=codec, title=title or None)] if body else []
            language = detect_language(text) if doc_type == "code" else None
            return [self._make(path, text, doc_type, encoding=codec, language=language)]
        doc_type = _EXTENSION_TYPES[suffix]
        language = CODE_LANGUAGES.get(suffix)
        fields: dict[str, Any] = {}
        if doc_type == "markdown":  # YAML front matter: metadata, not text
            fields, text = split_front_matter(text, safe_path(path), _LOADER_KEYS)
            if not text.strip():
                raise EmptyDocumentError(path, "only front matter, no text")
        return [self._make(path, text, doc_type, fields=fields, encoding=codec, language=language)]

    def _load_pdf(self, path: Path, data: bytes) -> list[Document]:
        from pypdf import PdfReader

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
            text = _normalize_newlines(text).strip()
            if not text:
                logger.debug("%s: page %d has no text", path, number)
                continue
            docs.append(
                self._make(path, text, "pdf", f"p{number}", page=number, total_pages=len(pages), title=title)
            )
        if not docs:
            raise LoadError(path, "no extractable text (scanned PDF?)")
        return docs

    def _load_docx(self, path: Path, data: bytes) -> list[Document]:
        import docx
        from docx.table import Table

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
                        # python-docx repeats a merged cell once per grid column, each sharing the XML
                        # element <w:tc>, which it exposes only as the private _tc
                        if id(cell._tc) in seen:  # noqa: SLF001 - merged cells repeat; keep one
                            continue
                        seen.add(id(cell._tc))  # noqa: SLF001
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
        return [self._make(path, text, "docx", title=title)] if text else []

    def _load_csv(self, path: Path, suffix: str, data: bytes) -> list[Document]:
        text, codec = self._decode(path, data)
        delimiter = _detect_delimiter(text, prefer_tab=suffix == ".tsv")
        try:
            rows = list(csv.reader(io.StringIO(text), delimiter=delimiter))
        except csv.Error as exc:
            raise LoadError(path, f"cannot parse CSV: {exc}") from exc
        rows = [r for r in rows if any(c.strip() for c in r)]
        if not rows:
            raise EmptyDocumentError(path, "empty file")
        header = [h.strip() or f"column_{i + 1}" for i, h in enumerate(rows[0])]
        docs: list[Document] = []
        for number, row in enumerate(rows[1:], start=1):
            if len(row) > len(header) and any(c.strip() for c in row[len(header) :]):
                logger.warning(
                    "%s: row %d has %d fields but the header has %d; the extra values are kept as %s",
                    safe_path(path),
                    number,
                    len(row),
                    len(header),
                    ", ".join(f"column_{i + 1}" for i in range(len(header), len(row))),
                )
            lines = []
            for i, value in enumerate(row):
                value = value.strip()
                if not value:
                    continue
                name = header[i] if i < len(header) else f"column_{i + 1}"
                lines.append(f"{name}: {value}")
            docs.append(self._make(path, "\n".join(lines), "csv", f"r{number}", row=number, encoding=codec))
        if not docs:
            raise EmptyDocumentError(path, "no data rows")
        return docs

    def _load_html(self, path: Path, data: bytes) -> list[Document]:
        declared: str | None = None
        if self.encoding is None and not data.startswith(codecs.BOM_UTF8):
            match = _META_CHARSET.search(data[:4096])
            if match:
                try:
                    declared = codecs.lookup(match.group(1).decode("ascii")).name
                    data.decode(declared)
                except (LookupError, UnicodeError):
                    declared = None
        text, codec = self._decode(path, data, declared)
        body, title = _html_to_text(text)
        return [self._make(path, body, "html", encoding=codec, title=title or None)] if body else []

    def _load_json(self, path: Path, data: bytes) -> list[Document]:
        text, codec = self._decode(path, data)
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise LoadError(path, f"invalid JSON: {exc}") from exc
        field_name = self.json_text_field
        if field_name is None:
            pretty = json.dumps(obj, ensure_ascii=False, indent=2)
            return [self._make(path, pretty, "json", encoding=codec)]
        if isinstance(obj, dict):
            record = self._json_record(path, obj, "", codec, where="top-level object")
            return [record] if record is not None else []
        if not isinstance(obj, list):
            raise LoadError(path, f"json_text_field '{field_name}' needs an object or a list of objects")
        docs: list[Document] = []
        for index, item in enumerate(obj, start=1):
            if not isinstance(item, dict):
                raise LoadError(path, f"item {index}: expected an object, got {type(item).__name__}")
            record = self._json_record(path, item, f"i{index}", codec, where=f"item {index}", item=index)
            if record is not None:
                docs.append(record)
        return docs

    def _json_record(
        self, path: Path, obj: dict[str, Any], locator: str, codec: str, *, where: str, **extra: Any
    ) -> Document | None:
        """One document from ``obj[json_text_field]``; None when that text is empty."""
        field_name = self.json_text_field
        assert field_name is not None
        if obj.get(field_name) is None:
            raise LoadError(path, f"{where}: missing text field '{field_name}'")
        text = _field_text(obj[field_name])
        if not text.strip():
            logger.debug("%s: %s has an empty '%s'; no document", path, where, field_name)
            return None
        meta = _scalar_metadata(obj, field_name)
        return self._make(path, text, "json", locator, meta, encoding=codec, **extra)

    def _load_jsonl(self, path: Path, data: bytes) -> list[Document]:
        text, codec = self._decode(path, data)
        docs: list[Document] = []
        for number, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise LoadError(path, f"line {number}: invalid JSON: {exc.msg}") from exc
            locator = f"l{number}"
            if self.json_text_field is None:
                docs.append(
                    self._make(
                        path,
                        json.dumps(obj, ensure_ascii=False),
                        "json",
                        locator,
                        line=number,
                        encoding=codec,
                    )
                )
            elif not isinstance(obj, dict):
                raise LoadError(path, f"line {number}: expected an object, got {type(obj).__name__}")
            else:
                record = self._json_record(path, obj, locator, codec, where=f"line {number}", line=number)
                if record is not None:
                    docs.append(record)
        return docs


class _Walker:
    """One directory walk of a :class:`DocumentLoader`: files in sorted order, each real file once.

    Symlinks are followed only with ``follow_symlinks`` (each real directory once, so loops are harmless);
    otherwise they, and directories that cannot be listed, are recorded in ``skipped``."""

    def __init__(self, loader: DocumentLoader, root: Path, skipped: list[SkippedFile]) -> None:
        self.loader, self.skipped = loader, skipped
        self.root, self.real_root = root, os.path.realpath(root)
        self.visited: set[str] = {self.real_root}  # real directories walked
        self.found: dict[str, tuple[bool, Path]] = {}  # real file -> (reached through a symlink, path)
        self.walked: list[tuple[str, Path]] = []  # (real file, path) in walk order

    def files(self) -> list[Path]:
        """The files to load; a file reached twice is kept under a path without symlinks when it has one."""
        self._walk(self.root, "", False)
        return [path for real, path in self.walked if self.found[real][1] is path]

    def _walk(self, directory: Path, rel: str, via_link: bool) -> None:
        loader = self.loader
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError as exc:
            self._skip(directory, f"cannot list directory: {exc.strerror or exc}", "error", exc)
            return
        for entry in entries:
            if entry.name.startswith(".") and not loader.include_hidden:
                continue
            rel_path = f"{rel}{entry.name}"
            try:
                link = entry.is_symlink()
                is_dir = entry.is_dir(follow_symlinks=True)
                is_file = not is_dir and entry.is_file(follow_symlinks=True)
            except OSError as exc:
                self._skip(entry.path, f"cannot read its status: {exc.strerror or exc}", "error", exc)
                continue
            if (loader.exclude and loader.exclude.matches(rel_path)) or (
                not is_dir and loader.include and not loader.include.matches(rel_path)
            ):
                continue
            if link and not (loader.follow_symlinks and (is_dir or is_file)):
                self._skip(
                    entry.path, _symlink_reason(entry.path, self.real_root, is_dir or is_file), "symlink"
                )
                continue
            real = os.path.realpath(entry.path)
            if is_dir:
                if real in self.visited:
                    logger.debug("not following %s: %s already visited", entry.path, real)
                    continue
                self.visited.add(real)
                self._walk(Path(entry.path), rel_path + "/", via_link or link)
            elif is_file:
                indirect, path = via_link or link, Path(entry.path)
                self.walked.append((real, path))
                if real not in self.found or (self.found[real][0] and not indirect):
                    self.found[real] = (indirect, path)

    def _skip(
        self, path: str | os.PathLike[str], reason: str, kind: str, cause: OSError | None = None
    ) -> None:
        """Record a path the walk leaves out; an unreadable one raises ``LoadError`` under ``on_error="raise"``."""
        key = safe_path(path)
        if cause is not None and self.loader.on_error == "raise":
            raise LoadError(key, reason) from cause
        (logger.warning if cause is not None else logger.info)("skipping %s: %s", key, reason)
        self.skipped.append(SkippedFile(key, reason, kind))


def _symlink_reason(path: str, real_root: str, resolves: bool) -> str:
    """Why a symlink is not followed: it is broken, or points outside or within the folder."""
    if not resolves:
        return "broken symlink (its target does not exist)"
    target = os.path.realpath(path)
    try:
        inside = os.path.commonpath([target, real_root]) == real_root
    except ValueError:  # another drive (Windows)
        inside = False
    where = "within the folder" if inside else "outside the folder"
    return f"symlink to {safe_path(target)} ({where}) not followed; follow_symlinks=True follows it"


def _detect_delimiter(text: str, *, prefer_tab: bool = False) -> str:
    """Pick the CSV delimiter: csv.Sniffer when its answer gives consistent rows, else ",", "\t", ";"."""
    sample = text[:65536]
    if len(text) > len(sample) and "\n" in sample:
        sample = sample[: sample.rindex("\n")]  # drop the cut-off last line
    sample = "\n".join([line for line in sample.split("\n")[:50] if line.strip()])
    candidates = ["\t", ",", ";"] if prefer_tab else [",", "\t", ";"]

    def field_count(delim: str) -> int:
        """Fields per row when every sample row has the same number (> 1), else 0."""
        try:
            counts = {len(r) for r in csv.reader(io.StringIO(sample), delimiter=delim) if r}
        except csv.Error:
            return 0
        if len(counts) != 1:
            return 0
        n = counts.pop()
        return n if n > 1 else 0

    try:
        sniffed: str | None = csv.Sniffer().sniff(sample, delimiters=",\t;|").delimiter
    except csv.Error:
        sniffed = None
    if sniffed and field_count(sniffed):
        return sniffed
    best = max((field_count(d), -i, d) for i, d in enumerate(candidates))
    if best[0]:
        return best[2]
    first = sample.split("\n", 1)[0]
    top = max((first.count(d), -i, d) for i, d in enumerate(candidates))
    return top[2] if top[0] else candidates[0]
