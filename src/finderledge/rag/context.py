"""Formats search results as a prompt-ready context: numbered passages, each with its citation.

The layout is configurable: ``start`` (number of the first passage, e.g. 0 or 1), ``citation`` (a format
string over :data:`CITATION_FIELDS` or a callable on the metadata) and ``template`` (one passage, over
``{n}``, ``{citation}`` and ``{content}``).  The defaults give ``[1] (source: …, chunk 2/5)`` and the text.
"""

from __future__ import annotations

import os
import string
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from langchain_core.documents import Document

from ..errors import ConfigurationError
from ..metadata import info_of, source_of
from ..results import SearchResult

__all__ = [
    "CITATION_FIELDS",
    "DEFAULT_TEMPLATE",
    "NO_CONTEXT",
    "citation",
    "citation_fields",
    "collapse_identical",
    "format_context",
]

NO_CONTEXT = "[no relevant context found]"
"""Returned by ``get_context`` when nothing matched, so a prompt never silently receives an empty string."""

DEFAULT_TEMPLATE = "[{n}] ({citation})\n{content}"
"""One passage of a context: its number, its citation and its text."""

CITATION_FIELDS = (
    "source",
    "file_name",
    "source_id",
    "locator",
    "page",
    "row",
    "chunk",
    "chunk_number",
    "chunk_index",
    "chunks",
    "id",
    "parent_id",
)
"""Fields a citation format string may use; a field the chunk lacks is empty (see :func:`citation_fields`)."""

_TEMPLATE_FIELDS = ("n", "citation", "content")

Citation = str | Callable[[Mapping[str, Any]], Any] | None


def _display_source(source: str) -> str:
    """A path relative to the working directory when it lies below it, else as stored."""
    try:
        rel = os.path.relpath(source)
    except ValueError:  # other drive on Windows
        return source
    return rel if not rel.startswith("..") and os.path.exists(source) else source


def _shown_source(metadata: Mapping[str, Any], document_id: str | None) -> str:
    """:func:`~finderledge.metadata.source_of` (``text:<parent id>`` for raw text), a path shown relative."""
    source = metadata.get("source")
    return _display_source(str(source)) if source not in (None, "") else source_of(metadata, document_id)


def citation(metadata: Mapping[str, Any], document_id: str | None = None) -> str:
    """``source: path, page 3, row 12, chunk 2/5`` — whatever of that the chunk has (raw text added without a
    source: ``source: text:<parent id>``, as ``SearchResult.source``; ``document_id`` when the metadata holds no
    FinderLedge ids)."""
    parts = [f"source: {_shown_source(metadata, document_id)}"]
    for key, label in (("page", "page"), ("row", "row")):
        if metadata.get(key) is not None:
            parts.append(f"{label} {metadata[key]}")
    info = info_of(metadata)
    if info.get("split_count") and info.get("split_index") is not None:
        parts.append(f"chunk {int(info['split_index']) + 1}/{info['split_count']}")
    return ", ".join(parts)


def citation_fields(metadata: Mapping[str, Any], document_id: str | None = None) -> dict[str, Any]:
    """The values a citation format string sees: ``chunk`` counts from 1 like the default citation
    (``chunk 2/5``; ``chunk_number`` is the same), ``chunk_index`` is ``split_index`` (from 0, as in chunk ids
    and chunk-level gold ids); ``source`` is ``text:<parent id>`` for raw text added without one."""
    info = info_of(metadata)
    index = int(info["split_index"]) if info.get("split_index") is not None else None
    values = {
        "source": _shown_source(metadata, document_id),
        "file_name": metadata.get("file_name"),
        "source_id": metadata.get("source_id"),
        "locator": metadata.get("locator"),
        "page": metadata.get("page"),
        "row": metadata.get("row"),
        "chunk": None if index is None else index + 1,
        "chunk_number": None if index is None else index + 1,
        "chunk_index": index,
        "chunks": info.get("split_count") if index is not None else None,
        "id": info.get("id"),
        "parent_id": info.get("parent_id", info.get("id")),
    }
    return {k: "" if v is None else v for k, v in values.items()}


def _fields_of(name: str, fmt: str, allowed: Sequence[str]) -> set[str]:
    """The field names a format string uses; a syntax error or an unknown field is a ConfigurationError."""
    try:
        used = {
            field.split(".")[0].split("[")[0]
            for _, field, _, _ in string.Formatter().parse(fmt)
            if field is not None
        }
    except ValueError as exc:
        raise ConfigurationError(f"{name}: not a valid format string {fmt!r} ({exc})") from None
    unknown = sorted(used - set(allowed))
    if unknown or "" in used:
        bad = unknown or ["{} (positional)"]
        raise ConfigurationError(
            f"{name}: unknown field(s) {bad} in {fmt!r}; expected fields among {list(allowed)}"
        )
    return used


def check_format(*, start: Any = 1, citation: Any = None, template: Any = DEFAULT_TEMPLATE) -> None:
    """Validate ``format_context``'s layout options (ConfigurationError naming the argument)."""
    if not isinstance(start, int) or isinstance(start, bool) or start < 0:
        raise ConfigurationError(
            f"start: expected the number of the first passage (0 or 1, an int >= 0), got {start!r}"
        )
    if isinstance(citation, str):
        _fields_of("citation", citation, CITATION_FIELDS)
    elif citation is not None and not callable(citation):
        raise ConfigurationError(
            f"citation: expected None, a format string such as '{{source}}#chunk={{chunk}}' or "
            f"a callable taking the metadata, got {type(citation).__name__}"
        )
    if not isinstance(template, str):
        raise ConfigurationError(f"template: expected a format string, got {type(template).__name__}")
    if "content" not in _fields_of("template", template, _TEMPLATE_FIELDS):
        raise ConfigurationError(f"template: {template!r} has no {{content}}: the passages would be left out")


def _cite(metadata: Mapping[str, Any], document_id: str | None, spec: Citation) -> str:
    if spec is None:
        return citation(metadata, document_id)
    if isinstance(spec, str):
        return spec.format_map(citation_fields(metadata, document_id))
    return str(spec(dict(metadata)))


def _passages(results: Iterable[Any]) -> list[tuple[Mapping[str, Any], str, str | None]]:
    """(metadata, text, id) of each result: a :class:`SearchResult` or a LangChain ``Document`` (e.g. from a
    retriever)."""
    if isinstance(results, (str, bytes, Mapping)) or not isinstance(results, Iterable):
        raise ConfigurationError(
            f"results: expected a list of search results or Documents, got {type(results).__name__}"
        )
    out: list[tuple[Mapping[str, Any], str, str | None]] = []
    for item in results:
        if isinstance(item, SearchResult):
            out.append((item.metadata, item.content, item.parent_id))
        elif isinstance(item, Document):
            out.append((item.metadata, item.page_content, item.id))
        else:
            raise ConfigurationError(
                f"results: expected SearchResult or Document items, got {type(item).__name__}"
            )
    return out


def _text_of(item: Any) -> str:
    return item.content if isinstance(item, SearchResult) else getattr(item, "page_content", "")


def collapse_identical(results: Iterable[Any]) -> list[list[Any]]:
    """Results (or Documents) grouped by identical text, whitespace aside, in the order of each text's first
    (best-ranked) copy: the same file added twice, from two sources, is one passage with both sources."""
    groups: dict[str, list[Any]] = {}
    for item in results:
        groups.setdefault(" ".join(_text_of(item).split()), []).append(item)
    return list(groups.values())


def format_context(
    results: Iterable[SearchResult | Document],
    *,
    max_chars: int | None = None,
    start: int = 1,
    citation: Citation = None,
    template: str = DEFAULT_TEMPLATE,
) -> str:
    """``[1] (source: …)`` then the passage, blank line between passages; :data:`NO_CONTEXT` when empty.

    Identical passages (the same text from two sources, whitespace aside) are given once, their citations
    joined with ``"; "``.  ``start`` numbers the first passage; ``citation`` is a format string over :data:`CITATION_FIELDS`
    (``"{source}#chunk={chunk}"``) or a callable ``metadata -> str`` (``None``: the default citation);
    ``template`` lays out one passage from ``{n}``, ``{citation}`` and ``{content}``.  ``max_chars`` caps
    the total length: passages that would overflow are left out (the first one's text is truncated rather
    than dropped, so the context is never empty when something matched; a cap shorter than its citation
    leaves the text alone).
    """
    check_format(start=start, citation=citation, template=template)
    blocks: list[str] = []
    used = 0
    passages = _passages(results)
    groups: dict[str, list[tuple[Mapping[str, Any], str, str | None]]] = {}
    for passage in passages:  # identical texts from two sources: one passage citing both
        groups.setdefault(" ".join(passage[1].split()), []).append(passage)
    for n, group in enumerate(groups.values(), start=start):
        _, content, _ = group[0]
        cite = "; ".join(dict.fromkeys(_cite(md, doc_id, citation) for md, _, doc_id in group))
        block = template.format(n=n, citation=cite, content=content.strip())
        if max_chars is not None and used + len(block) > max_chars:
            if not blocks:  # the first passage is cut in its text, never in its citation
                room = max_chars - len(template.format(n=n, citation=cite, content=""))
                blocks.append(
                    template.format(n=n, citation=cite, content=content.strip()[:room])
                    if room > 0
                    else content.strip()[:max_chars]
                )
            break
        blocks.append(block)
        used += len(block) + 2
    return "\n\n".join(blocks) if blocks else NO_CONTEXT
