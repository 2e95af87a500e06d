"""Formats search results as a prompt-ready context: numbered passages, each with its citation."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from .results import SearchResult

__all__ = ["NO_CONTEXT", "format_context", "citation"]

NO_CONTEXT = "[no relevant context found]"
"""Returned by ``get_context`` when nothing matched, so a prompt never silently receives an empty string."""


def _display_source(source: str) -> str:
    """A path relative to the working directory when it lies below it, else as stored."""
    try:
        rel = os.path.relpath(source)
    except ValueError:  # other drive on Windows
        return source
    return rel if not rel.startswith("..") and os.path.exists(source) else source


def citation(metadata: Mapping[str, Any]) -> str:
    """``source: path, page 3, row 12, chunk 2/5`` — whatever of that the chunk has."""
    parts = []
    source = metadata.get("source")
    parts.append(f"source: {_display_source(str(source))}" if source else "source: (text)")
    for key, label in (("page", "page"), ("row", "row")):
        if metadata.get(key) is not None:
            parts.append(f"{label} {metadata[key]}")
    if metadata.get("split_count") and not metadata.get("is_parent", False):
        parts.append(f"chunk {int(metadata.get('split_index', 0)) + 1}/{metadata['split_count']}")
    return ", ".join(parts)


def format_context(results: Sequence[SearchResult], *, max_chars: int | None = None) -> str:
    """``[1] (source: …)`` then the passage, blank line between passages; :data:`NO_CONTEXT` when empty.

    ``max_chars`` caps the total length: passages that would overflow are left out (the first one is
    truncated rather than dropped, so the context is never empty when something matched).
    """
    blocks: list[str] = []
    used = 0
    for n, result in enumerate(results, start=1):
        block = f"[{n}] ({citation(result.metadata)})\n{result.content.strip()}"
        if max_chars is not None and used + len(block) > max_chars:
            if not blocks:
                blocks.append(block[:max_chars])
            break
        blocks.append(block)
        used += len(block) + 2
    return "\n\n".join(blocks) if blocks else NO_CONTEXT
