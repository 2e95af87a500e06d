"""YAML front matter of Markdown files: metadata, not text.

A Markdown file that starts with a ``---`` line, YAML, and a closing ``---`` (or ``...``) line, as Jekyll,
Hugo, MkDocs and Obsidian write it, has that block parsed into metadata (``title``, ``tags`` …) and removed
from the text, so it is neither split into chunks nor shown in answers.  Values become what metadata can
hold (dates as ISO strings); keys the loader sets itself are kept from the loader.  A block that is not a
YAML mapping stays in the text, with a warning naming the file.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import re
from collections.abc import Collection
from typing import Any

import yaml

__all__ = ["split_front_matter"]

logger = logging.getLogger(__name__)

_BLOCK = re.compile(r"\A\ufeff?---[ \t]*\n(?P<yaml>.*?)\n(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.DOTALL)


def _storable(value: Any) -> Any:
    """``value`` as metadata can hold it: dates as ISO strings, sets as lists, other objects as text."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (dt.date, dt.datetime, dt.time)):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _storable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_storable(v) for v in value]
    return str(value)


def split_front_matter(text: str, where: str, reserved: Collection[str] = ()) -> tuple[dict[str, Any], str]:
    """``(metadata, body)`` of a Markdown text; ``({}, text)`` when it has no front matter.

    ``reserved``: keys the caller owns (the loader's own fields); front matter naming one is ignored with
    a warning."""
    match = _BLOCK.match(text)
    if match is None:
        return {}, text
    try:
        data = yaml.safe_load(match["yaml"])
    except yaml.YAMLError as exc:
        logger.warning(
            "%s: front matter is not valid YAML (%s); kept as text", where, str(exc).splitlines()[0]
        )
        return {}, text
    if data is None:
        data = {}
    if not isinstance(data, dict):
        logger.warning("%s: front matter is not a YAML mapping; kept as text", where)
        return {}, text
    fields = {str(k): _storable(v) for k, v in data.items() if v is not None and str(k)}
    clash = sorted(k for k in fields if k in reserved)
    if clash:
        logger.warning("%s: front matter keys %s are set by FinderLedge; ignored", where, ", ".join(clash))
    return {k: v for k, v in fields.items() if k not in reserved}, text[match.end() :].lstrip("\n")
