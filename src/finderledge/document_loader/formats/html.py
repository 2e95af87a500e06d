"""HTML: the visible text (block elements become line breaks, table cells " | ") and the title.

The encoding is, in order: a forced one, a BOM, a ``<meta charset>`` in the first 4 KiB that decodes the
file, then the usual detection.
"""

from __future__ import annotations

import codecs
import re
from html.parser import HTMLParser

from langchain_core.documents import Document

from .base import ReadOptions, SourceFile, decode_data, make_document

__all__ = ["HTML", "HtmlFormat", "html_to_text"]

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


def html_to_text(html: str) -> tuple[str, str]:
    """Visible text and title of an HTML document."""
    parser = _HTMLTextExtractor()
    parser.feed(html)
    parser.close()
    return parser.text(), parser.title()


META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)


class HtmlFormat:
    """``.html``/``.htm``/``.xhtml`` files: one document of visible text, titled."""

    binary = False

    def read(self, file: SourceFile, options: ReadOptions) -> list[Document]:
        """One document of the page's visible text (none when the page shows no text)."""
        data = file.data()
        declared: str | None = None
        if options.encoding is None and not data.startswith(codecs.BOM_UTF8):
            match = META_CHARSET.search(data[:4096])
            if match:
                try:
                    declared = codecs.lookup(match.group(1).decode("ascii")).name
                    data.decode(declared)
                except (LookupError, UnicodeError):
                    declared = None
        text, codec = decode_data(file.path, data, declared or options.encoding)
        body, title = html_to_text(text)
        return [make_document(file.path, body, "html", encoding=codec, title=title or None)] if body else []


HTML = HtmlFormat()
