"""What a file is: the extension tables, and the sniffing of text without a known extension.

``detect_doc_type`` and ``detect_language`` decide ``doc_type_detected`` and ``language``: a known extension
wins; otherwise the text is sniffed (JSON, HTML, a shebang or obvious Python, Markdown headers or fences).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

__all__ = [
    "CODE_LANGUAGES",
    "CSV_EXTENSIONS",
    "EXTENSION_TYPES",
    "HTML_EXTENSIONS",
    "JSONL_EXTENSIONS",
    "JSON_EXTENSIONS",
    "LOADER_KEYS",
    "MARKDOWN_EXTENSIONS",
    "RESERVED_KEYS",
    "SUPPORTED_EXTENSIONS",
    "TEXT_EXTENSIONS",
    "detect_doc_type",
    "detect_language",
    "sniff_doc_type",
    "suffix_of",
]

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
PLAIN_CODE_EXTENSIONS = frozenset(
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

TEXT_EXTENSIONS = frozenset({".txt", ".text", ".rst", ".log"}) | PLAIN_CODE_EXTENSIONS
# the metadata keys the loader (and FinderLedge) set: front matter does not override them
LOADER_KEYS = frozenset(
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
MARKDOWN_EXTENSIONS = frozenset({".md", ".markdown", ".mdown", ".mkd"})
HTML_EXTENSIONS = frozenset({".html", ".htm", ".xhtml"})
JSON_EXTENSIONS = frozenset({".json"})
JSONL_EXTENSIONS = frozenset({".jsonl", ".ndjson"})
CSV_EXTENSIONS = frozenset({".csv", ".tsv"})

EXTENSION_TYPES: dict[str, str] = {
    **{e: "text" for e in TEXT_EXTENSIONS},
    **{e: "markdown" for e in MARKDOWN_EXTENSIONS},
    **{e: "html" for e in HTML_EXTENSIONS},
    **{e: "json" for e in JSON_EXTENSIONS | JSONL_EXTENSIONS},
    **{e: "csv" for e in CSV_EXTENSIONS},
    **{e: "code" for e in CODE_LANGUAGES},
    ".pdf": "pdf",
    ".docx": "docx",
}

#: Every extension the loader accepts (files without an extension are accepted when they are text).
SUPPORTED_EXTENSIONS: frozenset[str] = frozenset(EXTENSION_TYPES)

#: Metadata keys set by the loader; JSON fields with these names are stored as ``json_<name>`` so they
#: never overwrite or get overwritten.
RESERVED_KEYS = frozenset(
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
    # each regex runs only when the words it needs are there (a substring test is C-speed): same answers
    strong = len(_PY_STRONG.findall(text)) if ("def" in text or "class" in text or "__name__" in text) else 0
    imports = len(_PY_IMPORT.findall(text)) if "import" in text else 0
    return strong + imports >= 2 or (strong >= 1 and not _MD_HEADER.search(text))


def sniff_doc_type(text: str) -> str:
    stripped = text.strip()
    if not stripped:
        return "text"
    if stripped[0] in "{[":
        try:
            if isinstance(json.loads(stripped), (dict, list)):
                return "json"
        except ValueError:
            pass
    # each regex runs only when the characters it needs are there (a substring test is C-speed): plain
    # prose, most of what is sniffed, skips them all
    head = stripped[:4096]
    if "<" in head and _HTML_DOC.search(head):
        return "html"
    if _shebang_language(stripped) is not None:
        return "code"
    if ("```" in text or "~~~" in text) and _MD_FENCE.search(text):
        return "markdown"
    if _looks_like_python(text):
        return "code"
    if ("#" in text and _MD_HEADER.search(text)) or (
        ("\n=" in text or "\n-" in text) and _MD_SETEXT.search(text)
    ):
        return "markdown"
    return "text"


def suffix_of(path: str | Path) -> str:
    """The lower-case extension of ``path`` ("" when it has none)."""
    return Path(path).suffix.lower()


def detect_doc_type(path: str | Path | None, text: str) -> str:
    """Return the ``doc_type_detected`` value for a file path and/or its text.

    A known extension decides (".md" -> "markdown", ".py" -> "code", ".sql" -> "text", ...).  Without a
    path (raw strings) or with an unknown/missing extension the text is sniffed: "json" if it parses as
    an object/array, "html" for an HTML document, "code" for a shebang or obvious Python, "markdown"
    for headers or code fences, else "text".  Pair with :func:`detect_language` for the language.
    """
    if path is not None:
        doc_type = EXTENSION_TYPES.get(suffix_of(path))
        if doc_type is not None:
            return doc_type
    return sniff_doc_type(text)


def detect_language(text: str, path: str | Path | None = None) -> str | None:
    """Return the ``langchain_text_splitters.Language`` value for code, or None when it is not code.

    The extension decides when ``path`` has a code extension; otherwise a shebang line or obvious
    Python (``def``/``class``/``import`` lines) is recognised.  ``detect_language(t, p)`` is not None
    exactly when ``detect_doc_type(p, t) == "code"``.
    """
    if path is not None:
        suffix = suffix_of(path)
        if suffix in CODE_LANGUAGES:
            return CODE_LANGUAGES[suffix]
        if suffix in EXTENSION_TYPES:
            return None
    if sniff_doc_type(text) != "code":
        return None
    return _shebang_language(text.lstrip()) or "python"
