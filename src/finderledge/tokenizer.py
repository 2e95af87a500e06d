"""Tokenizers for the BM25 keyword store.

The keyword store only needs a callable ``text -> list[str]``; the :class:`Tokenizer` protocol adds a
``name`` and ``to_dict()`` so an index can record which tokenizer built it and reopen with the same
one (query tokens must be produced exactly like document tokens, or BM25 silently finds nothing).

:class:`AutoTokenizer` is the default.  It decides per text, by script:

* Latin (and other space-separated) scripts: NFKC, lower-case, Unicode ``\\w+`` words, English stop
  words removed and Snowball stemming (PyStemmer), both configurable.
* Japanese (the text contains kana, or ``japanese="always"`` and it contains kanji): SudachiPy with
  ``sudachidict_core``, ``normalized_form()`` of each morpheme, particles, auxiliary verbs, symbols
  and whitespace dropped.  Latin words that Sudachi finds inside Japanese text go through the
  Latin pipeline, so ``FinderLedgeの使い方`` yields the same ``finderledg`` token as the English
  query ``FinderLedge``.
* Scripts written without spaces where no dictionary is used (Han text without kana, Thai, Lao,
  Khmer, Myanmar, ...): overlapping character bigrams (a lone character stays a unigram).
"""

from __future__ import annotations

import logging
import re
import threading
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from itertools import chain
from typing import Any, Literal, Protocol, runtime_checkable

from .errors import ConfigurationError
from .registry import Registry

__all__ = [
    "ENGLISH_STOP_WORDS",
    "TOKENIZERS",
    "AutoTokenizer",
    "SimpleTokenizer",
    "Tokenizer",
    "UnknownTokenizerError",
    "register_tokenizer",
    "tokenizer_from_dict",
    "tokenizer_spec",
]

logger = logging.getLogger(__name__)

#: Lucene's classic English stop-word list (also what bm25s uses): short on purpose, so that
#: stop-word removal never drops content words.
ENGLISH_STOP_WORDS: frozenset[str] = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "if",
        "in",
        "into",
        "is",
        "it",
        "no",
        "not",
        "of",
        "on",
        "or",
        "such",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "will",
        "with",
    ]
)

# Sudachi rejects inputs above 49,149 bytes; stay well below and cut at sentence ends.
_SUDACHI_MAX_BYTES = 40_000

# Words whose index terms an AutoTokenizer remembers (see _TermMemo); the memo is emptied when it is full, at
# ~14 MiB of short words.  Tokenizing bench_scale's 100k chunks (~110k distinct words) took as long with 2**17.
TERM_MEMO_SIZE = 1 << 16

_KANA = r"\u3040-\u309f\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9f"
_HAN = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f\u3005\u3007"
# Scripts written without spaces between words (besides Japanese): Thai, Lao, Myanmar, Khmer, Tibetan.
_NOSPACE = r"\u0e00-\u0e7f\u0e80-\u0eff\u1000-\u109f\u1780-\u17ff\u0f00-\u0fff"

_WORD_RE = re.compile(r"\w+")
# ASCII text's ``\w+`` words, lower-cased, are ``text.translate(_ASCII_FOLD).split()``: letters to lower
# case, digits and "_" kept, every other character a space (half the time of ``findall``).
_ASCII_FOLD = str.maketrans(
    {c: (c.lower() if c.isalnum() or c == "_" else " ") for c in map(chr, range(128))}
)
_HAS_KANA_RE = re.compile(f"[{_KANA}]")
_HAS_HAN_RE = re.compile(f"[{_HAN}]")
# One scan: a run of a no-space script (group 1) or a word of other scripts (group 2).
_RUN_OR_WORD_RE = re.compile(f"([{_KANA}{_HAN}\u30fc]+|[{_NOSPACE}]+)|([^\\W{_KANA}{_HAN}{_NOSPACE}\u30fc]+)")
_HAS_CJK_RE = re.compile(f"[{_KANA}{_HAN}{_NOSPACE}\u30fc]")
_SENTENCE_END_RE = re.compile(r"(?<=[。．！？!?\n])")

# Sudachi part-of-speech (first level) we drop: particles, auxiliary verbs, symbols, whitespace.
_JA_DROP_POS = frozenset({"助詞", "助動詞", "補助記号", "記号", "空白"})
# ... and, with ``drop_pronouns``, pronouns: 彼・これ and the question words 何・誰・どこ・いつ, which
# every question contains and no answer passage is about.  English question words are kept: dropping
# them did not help hybrid search on scifact or msmarco (docs/evaluation.md).
_JA_PRONOUN_POS = "代名詞"


@runtime_checkable
class Tokenizer(Protocol):
    """What the keyword store needs from a tokenizer.

    ``to_dict()`` must return JSON-serialisable settings including ``"name"``; together with
    :func:`register_tokenizer` it lets an index reopen with an identical tokenizer.
    """

    name: str

    def __call__(self, text: str) -> list[str]: ...

    def to_dict(self) -> dict[str, Any]: ...


#: tokenizers by the ``name`` their ``to_dict()`` records: what an index reopens with
TOKENIZERS: Registry[Callable[..., Tokenizer]] = Registry(
    "tokenizer",
    "keyword_tokenizer",
    also="(a recorded name; pass the tokenizer itself or register it with "
    "finderledge.tokenizer.register_tokenizer)",
)


def register_tokenizer(name: str, factory: Callable[..., Tokenizer]) -> None:
    """Make ``tokenizer_from_dict({"name": name, **kwargs})`` call ``factory(**kwargs)``."""
    TOKENIZERS.register(name, factory)


class UnknownTokenizerError(ConfigurationError):
    """No tokenizer is registered under the name a spec gives (a ``ValueError``, as every ConfigurationError)."""


def tokenizer_spec(tokenizer: Any, rebuilt_by: str | None = None) -> dict[str, Any]:
    """The JSON description of ``tokenizer`` an index records (``to_dict()`` and its name).  One without
    ``to_dict`` gets a ``custom:`` name (it cannot be rebuilt from it), or is refused when ``rebuilt_by`` says
    who rebuilds the tokenizer from the record (the engine-side keyword legs: every writer)."""
    to_dict = getattr(tokenizer, "to_dict", None)
    if callable(to_dict):
        spec = dict(to_dict())
        spec.setdefault("name", getattr(tokenizer, "name", type(tokenizer).__qualname__))
        return spec
    if rebuilt_by is not None:
        raise ConfigurationError(
            f"setting 'keyword_index': 'engine' needs a keyword_tokenizer with to_dict() ({rebuilt_by}), got "
            f"{type(tokenizer).__name__}"
        )
    return {"name": "custom:" + getattr(tokenizer, "__qualname__", type(tokenizer).__qualname__)}


def tokenizer_from_dict(spec: Mapping[str, Any]) -> Tokenizer:
    """Rebuild a tokenizer from its ``to_dict()``; raises :class:`UnknownTokenizerError` for unknown names."""
    settings = dict(spec)
    name = str(settings.pop("name", None))
    try:
        factory = TOKENIZERS.get(name)
    except ConfigurationError as exc:
        raise UnknownTokenizerError(str(exc)) from None
    return factory(**settings)


# --------------------------------------------------------------------------------------------------
# Sudachi: one Dictionary per process (loading it takes ~0.2 s and ~70 MB), one tokenizer per thread
# and split mode, because sudachipy tokenizer objects must not be shared across threads.
# --------------------------------------------------------------------------------------------------
_sudachi_lock = threading.Lock()
_sudachi_dictionary: Any = None
_sudachi_local = threading.local()


def _sudachi_tokenizer(mode: str) -> Any:
    """The calling thread's sudachipy tokenizer for ``mode`` ('A', 'B' or 'C'), created lazily."""
    global _sudachi_dictionary
    cache: dict[str, Any] | None = getattr(_sudachi_local, "tokenizers", None)
    if cache is None:
        cache = {}
        _sudachi_local.tokenizers = cache
    tok = cache.get(mode)
    if tok is None:
        with _sudachi_lock:
            if _sudachi_dictionary is None:
                from sudachipy import Dictionary  # imported lazily: English-only users never pay for it

                _sudachi_dictionary = Dictionary(dict="core")
                logger.debug("loaded the Sudachi core dictionary")
            tok = _sudachi_dictionary.tokenizer(mode=mode, fields={"pos", "normalized_form"})
        cache[mode] = tok
    return tok


def _drop_pos_ids(pronouns: bool) -> Callable[[int], bool]:
    """A cached ``pos_id -> should drop`` test (POS tuples are looked up once per id)."""
    memo: dict[int, bool] = {}
    dropped = _JA_DROP_POS | {_JA_PRONOUN_POS} if pronouns else _JA_DROP_POS

    def drop(pos_id: int) -> bool:
        hit = memo.get(pos_id)
        if hit is None:
            hit = _sudachi_dictionary.pos_of(pos_id)[0] in dropped
            memo[pos_id] = hit
        return hit

    return drop


def _split_for_sudachi(text: str, limit: int = _SUDACHI_MAX_BYTES) -> list[str]:
    """Cut ``text`` into pieces below Sudachi's input limit, preferring sentence ends."""
    if len(text) * 4 <= limit or len(text.encode("utf-8")) <= limit:
        return [text]
    pieces: list[str] = []
    buf: list[str] = []
    size = 0
    for sent in _SENTENCE_END_RE.split(text):
        n = len(sent.encode("utf-8"))
        if n > limit:  # one huge "sentence": hard cut by characters (4 bytes per char at most)
            if buf:
                pieces.append("".join(buf))
                buf, size = [], 0
            step = limit // 4
            pieces.extend(sent[i : i + step] for i in range(0, len(sent), step))
            continue
        if size + n > limit and buf:
            pieces.append("".join(buf))
            buf, size = [], 0
        buf.append(sent)
        size += n
    if buf:
        pieces.append("".join(buf))
    return pieces


class _TermMemo(dict[str, tuple[str, ...]]):
    """Lower-case word -> its index terms: ``(stem,)``, or ``()`` when a stop word or shorter than ``min_length``.

    A word not seen yet goes through the pipeline (``__missing__``) and is remembered: texts repeat the words of
    the texts before them, and a lookup costs far less than the stop-word filter and the stemmer's call.  Emptied
    when full (:data:`TERM_MEMO_SIZE`).  Threads may share it: an entry is written once, whole."""

    def __init__(self, stopwords: frozenset[str], min_length: int, stemmer: Any) -> None:
        super().__init__()
        self.stopwords, self.min_length, self.stemmer = stopwords, min_length, stemmer

    def __missing__(self, word: str) -> tuple[str, ...]:
        if word in self.stopwords or len(word) < self.min_length:
            terms: tuple[str, ...] = ()
        else:
            terms = (self.stemmer.stemWord(word),) if self.stemmer is not None else (word,)
        if len(self) >= TERM_MEMO_SIZE:
            self.clear()
        self[word] = terms
        return terms


class SimpleTokenizer:
    """Lower-cased Unicode ``\\w+`` words, nothing else (no stemming, no stop words, no CJK logic).

    Useful as a baseline and in tests; it is what "split on whitespace" tokenizers effectively do.
    """

    name = "simple"

    def __call__(self, text: str) -> list[str]:
        """Tokenize ``text``."""
        return _WORD_RE.findall(text.lower())

    def to_dict(self) -> dict[str, Any]:
        """Settings for :func:`tokenizer_from_dict`."""
        return {"name": self.name}

    def __repr__(self) -> str:
        return "SimpleTokenizer()"


class AutoTokenizer:
    """Script-aware default tokenizer (see the module docstring).

    Args:
        language: Snowball stemmer language for Latin-script words (any PyStemmer language).
        stem: apply the stemmer.
        stopwords: ``True`` drops the built-in list for ``language`` (English only; other languages
            have none), ``False`` keeps everything, an iterable gives your own list (lower-case).
        japanese: ``"auto"`` uses Sudachi for texts that contain kana and bigrams for kanji-only
            texts (they may be Chinese); ``"always"`` also sends kanji-only texts to Sudachi (use it
            for Japanese corpora: a kanji-only query such as ``東京都庁`` then matches);
            ``"never"`` uses bigrams for every CJK text.
        split_mode: Sudachi split mode: ``"A"`` (short units), ``"B"`` or ``"C"`` (named entities).
        min_length: drop Latin-script tokens shorter than this many characters.
        drop_pronouns: drop Japanese pronouns, question words included (何・誰・どこ・いつ).  An index
            recorded before this setting existed reopens with ``False``, as it was built.

    The settings are fixed once built: the tokenizer remembers each Latin word's terms (:class:`_TermMemo`).
    """

    name = "auto"

    def __init__(
        self,
        language: str = "english",
        *,
        stem: bool = True,
        stopwords: bool | Iterable[str] = True,
        japanese: Literal["auto", "always", "never"] = "auto",
        split_mode: Literal["A", "B", "C"] = "A",
        min_length: int = 1,
        drop_pronouns: bool = True,
    ) -> None:
        if japanese not in ("auto", "always", "never"):
            raise ValueError(f"japanese must be 'auto', 'always' or 'never', got {japanese!r}")
        if split_mode not in ("A", "B", "C"):
            raise ValueError(f"split_mode must be 'A', 'B' or 'C', got {split_mode!r}")
        self.language = language
        self.stem = stem
        self.japanese = japanese
        self.split_mode = split_mode
        self.min_length = int(min_length)
        self.drop_pronouns = bool(drop_pronouns)
        if stopwords is True:
            self._stopwords: frozenset[str] = (
                ENGLISH_STOP_WORDS if language in ("english", "en", "porter") else frozenset()
            )
            self._stopwords_setting: bool | list[str] = True
        elif stopwords is False:
            self._stopwords = frozenset()
            self._stopwords_setting = False
        else:
            words = sorted({w.lower() for w in stopwords})
            self._stopwords = frozenset(words)
            self._stopwords_setting = words
        self._stemmer: Any = None
        if stem:
            import Stemmer  # PyStemmer

            try:
                self._stemmer = Stemmer.Stemmer(language)
            except KeyError as exc:
                raise ValueError(
                    f"no Snowball stemmer for language {language!r}; "
                    f"available: {sorted(Stemmer.algorithms())}"
                ) from exc
        self._drop_pos: Callable[[int], bool] | None = None
        self._terms = _TermMemo(self._stopwords, self.min_length, self._stemmer)

    # -- public ------------------------------------------------------------------------------------
    def __call__(self, text: str) -> list[str]:
        """Tokenize ``text`` into index terms."""
        if not text:
            return []
        if text.isascii():  # NFKC is the identity on ASCII, which has no kana, Han or no-space script
            return self._words(text.translate(_ASCII_FOLD).split())
        text = unicodedata.normalize("NFKC", text)
        if self.japanese != "never" and (
            _HAS_KANA_RE.search(text) or (self.japanese == "always" and _HAS_HAN_RE.search(text))
        ):
            return self._japanese(text)
        return self._latin_and_bigrams(text)

    def to_dict(self) -> dict[str, Any]:
        """Settings for :func:`tokenizer_from_dict` (stored in the index manifest)."""
        return {
            "name": self.name,
            "language": self.language,
            "stem": self.stem,
            "stopwords": self._stopwords_setting,
            "japanese": self.japanese,
            "split_mode": self.split_mode,
            "min_length": self.min_length,
            "drop_pronouns": self.drop_pronouns,
        }

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.to_dict().items() if k != "name")
        return f"AutoTokenizer({args})"

    # -- pipelines ---------------------------------------------------------------------------------
    def _words(self, words: list[str]) -> list[str]:
        """Latin pipeline on already-split lower-case words: stop words, length, stemming (a dict lookup per
        word seen before: see :class:`_TermMemo`)."""
        return list(chain.from_iterable(map(self._terms.__getitem__, words)))

    def _latin_and_bigrams(self, text: str) -> list[str]:
        """Text without Japanese: ``\\w+`` words; runs of no-space scripts become bigrams."""
        lowered = text.lower()
        if not _HAS_CJK_RE.search(lowered):
            return self._words(_WORD_RE.findall(lowered))
        out: list[str] = []
        pending: list[str] = []
        for run, word in _RUN_OR_WORD_RE.findall(lowered):
            if word:
                pending.append(word)
                continue
            if pending:
                out.extend(self._words(pending))
                pending = []
            out.extend(_bigrams(run))
        if pending:
            out.extend(self._words(pending))
        return out

    def _japanese(self, text: str) -> list[str]:
        """Sudachi morphemes (normalized form); Latin morphemes go through the Latin pipeline."""
        tok = _sudachi_tokenizer(self.split_mode)
        if self._drop_pos is None:
            self._drop_pos = _drop_pos_ids(self.drop_pronouns)
        drop = self._drop_pos
        out: list[str] = []
        for piece in _split_for_sudachi(text):
            latin: list[str] = []
            for m in tok.tokenize(piece):
                if drop(m.part_of_speech_id()):
                    continue
                surface = m.surface()
                # Decide by the surface: Sudachi normalizes some English words to katakana
                # ("Running" -> "ランニング"), which would not match English-only text.
                if not _HAS_CJK_RE.search(surface):
                    words = _WORD_RE.findall(surface.lower())
                    if words:
                        latin.extend(words)
                    continue
                if latin:
                    out.extend(self._words(latin))
                    latin = []
                out.append(m.normalized_form())
            if latin:
                out.extend(self._words(latin))
        return out


def _bigrams(run: str) -> list[str]:
    """Overlapping character bigrams of ``run`` (the run itself when it is one character)."""
    if len(run) < 2:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def _auto_from_dict(**settings: Any) -> AutoTokenizer:
    """``AutoTokenizer`` from a recorded spec; settings added later default to how older indexes were built."""
    settings.setdefault("drop_pronouns", False)
    return AutoTokenizer(**settings)


register_tokenizer("auto", _auto_from_dict)
register_tokenizer("simple", lambda: SimpleTokenizer())
