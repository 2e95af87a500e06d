"""AutoTokenizer's output is exactly that of the tokenizer indexes were built with (issue 29's faster one).

Indexes store the tokenizer's spec and rely on it: a text must give the same terms with the ASCII fast path and
the word -> term memo as with the pipeline main 79f6b67 shipped, copied below as the oracle (:class:`Oracle`).
Property tests compare both on random mixes of English, Japanese, Chinese, Korean, Thai, digits, punctuation,
full-width forms, ligatures, emoji, long words and stop words, for every setting that changes the pipeline; the
tokenizer under test keeps its memo across examples (warm) and is also run with a memo bound of a few words.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from finderledge import tokenizer as tkmod
from finderledge.tokenizer import ENGLISH_STOP_WORDS, AutoTokenizer

# ------------------------------------------------------------------------------------------------------
# The oracle: AutoTokenizer's pipeline as of main 79f6b67 (before the ASCII fast path and the term memo).
# ------------------------------------------------------------------------------------------------------
_KANA = r"\u3040-\u309f\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9f"
_HAN = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f\u3005\u3007"
_NOSPACE = r"\u0e00-\u0e7f\u0e80-\u0eff\u1000-\u109f\u1780-\u17ff\u0f00-\u0fff"
_WORD_RE = re.compile(r"\w+")
_HAS_KANA_RE = re.compile(f"[{_KANA}]")
_HAS_HAN_RE = re.compile(f"[{_HAN}]")
_RUN_OR_WORD_RE = re.compile(f"([{_KANA}{_HAN}\u30fc]+|[{_NOSPACE}]+)|([^\\W{_KANA}{_HAN}{_NOSPACE}\u30fc]+)")
_HAS_CJK_RE = re.compile(f"[{_KANA}{_HAN}{_NOSPACE}\u30fc]")


class Oracle:
    """main 79f6b67's AutoTokenizer pipeline (Sudachi loading and the POS filter are the module's own)."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self.tok = AutoTokenizer(**settings)  # for its settings, stemmer and Sudachi helpers only
        self.drop = tkmod._drop_pos_ids(self.tok.drop_pronouns)

    def __call__(self, text: str) -> list[str]:
        if not text:
            return []
        text = unicodedata.normalize("NFKC", text)
        japanese = self.tok.japanese
        if japanese != "never" and (
            _HAS_KANA_RE.search(text) or (japanese == "always" and _HAS_HAN_RE.search(text))
        ):
            return self._japanese(text)
        return self._latin_and_bigrams(text)

    def _words(self, words: list[str]) -> list[str]:
        stop = self.tok._stopwords
        kept = [w for w in words if w not in stop and len(w) >= self.tok.min_length]
        if self.tok._stemmer is not None and kept:
            return list(self.tok._stemmer.stemWords(kept))
        return kept

    def _latin_and_bigrams(self, text: str) -> list[str]:
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
            out.extend([run] if len(run) < 2 else [run[i : i + 2] for i in range(len(run) - 1)])
        if pending:
            out.extend(self._words(pending))
        return out

    def _japanese(self, text: str) -> list[str]:
        tok = tkmod._sudachi_tokenizer(self.tok.split_mode)
        out: list[str] = []
        for piece in tkmod._split_for_sudachi(text):
            latin: list[str] = []
            for m in tok.tokenize(piece):
                if self.drop(m.part_of_speech_id()):
                    continue
                surface = m.surface()
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


# ------------------------------------------------------------------------------------------------------
# Texts: pieces of many scripts and forms, joined by many kinds of separators.
# ------------------------------------------------------------------------------------------------------
_PIECES = [
    *sorted(ENGLISH_STOP_WORDS),
    "The",
    "THE",
    "Running",
    "dogs",
    "jumping",
    "fences",
    "generously",
    "s",
    "sses",
    "ies",
    "a1",
    "x",
    "snake_case_name",
    "__init__",
    "CamelCaseWord",
    "2024",
    "3.14",
    "1,000,000",
    "v2.0-beta",
    "e-mail",
    "don't",
    "O'Brien",
    "café",
    "naïve",
    "Straße",
    "ÉCOLE",
    "İstanbul",
    "Ǆemal",
    "ﬁnance",  # ligature: NFKC makes it "finance"
    "x²",
    "①②",
    "Ⅻ",
    "٣٤٥",  # Arabic-Indic digits
    "ＦｉｎｄｅｒＬｅｄｇｅ",  # full-width Latin
    "１２３",
    "ｶﾀｶﾅ",  # half-width katakana
    "東京都庁に行った。",
    "FinderLedgeの使い方",
    "彼は何をしましたか",
    "ひらがな",
    "カタカナー",
    "漢字",
    "東京都庁",
    "機械学習",
    "中华人民共和国",
    "我爱北京天安门",
    "한국어",
    "안녕하세요",
    "ภาษาไทย",
    "ພາສາລາວ",
    "မြန်မာ",
    "ខ្មែរ",
    "བོད",
    "々〇",
    "😀",
    "👍🏽",
    "🇯🇵",
    "Ω",
    "Привет",
    "مرحبا",
    "שלום",
    "a" * 300,
    "Pneumonoultramicroscopicsilicovolcanoconiosis" * 3,
    "\u0301",  # a lone combining accent
    "e\u0301",  # e + combining acute: NFKC composes it
    "\u00a0",
    "\u200b",
]
_SEPARATORS = [
    " ",
    "  ",
    "\n",
    "\t",
    ". ",
    ", ",
    "-",
    "_",
    "/",
    "'",
    "。",
    "、",
    "！",
    "？",
    "\u3000",
    "",
    "\u00a0",
]

texts = st.lists(
    st.tuples(st.sampled_from(_PIECES), st.sampled_from(_SEPARATORS)), min_size=0, max_size=12
).map(lambda parts: "".join(p + s for p, s in parts))
any_text = st.one_of(
    texts, st.text(max_size=80), st.text(alphabet=st.characters(max_codepoint=127), max_size=80)
)

SETTINGS: list[dict[str, Any]] = [
    {},
    {"stem": False},
    {"stopwords": False},
    {"stem": False, "stopwords": False},
    {"stopwords": ["dogs", "café", "漢字", "x"], "min_length": 3},
    {"min_length": 2, "japanese": "always"},
    {"japanese": "never", "drop_pronouns": False},
    {"language": "porter"},  # porter stems "s" to "": an empty term, kept
    {"language": "german", "split_mode": "C"},
]
# one tokenizer per setting for the whole module: its memo stays warm across examples, as in a build
_WARM = [AutoTokenizer(**s) for s in SETTINGS]
_ORACLES = [Oracle(s) for s in SETTINGS]

_FAST = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_FAST
@given(text=any_text, which=st.integers(0, len(SETTINGS) - 1))
def test_same_terms_as_the_oracle_cold_and_warm(text: str, which: int) -> None:
    expected = _ORACLES[which](text)
    assert AutoTokenizer(**SETTINGS[which])(text) == expected  # empty memo
    warm = _WARM[which]
    assert warm(text) == expected  # memo holding earlier examples' words
    assert warm(text) == expected  # every word now remembered


@_FAST
@given(batch=st.lists(any_text, min_size=1, max_size=8), which=st.integers(0, len(SETTINGS) - 1))
def test_same_terms_with_a_tiny_memo(batch: list[str], which: int) -> None:
    """A memo of 4 words, emptied again and again (also by a text with more new words than that)."""
    tok = AutoTokenizer(**SETTINGS[which])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tkmod, "TERM_MEMO_SIZE", 4)
        for text in batch + batch:
            assert tok(text) == _ORACLES[which](text)


@pytest.mark.parametrize(
    "text",
    [
        "",
        " ",
        "the and of",  # stop words only
        "The THE the",
        "s s s",
        "!!! ... ---",
        "ＡＢＣ　Ｄｏｇｓ",
        "東京都庁に行った。Running dogs",
        "中文字符 mixed with English words",
        "x" * 10_000,
        "word " * 5_000,
    ],
)
@pytest.mark.parametrize("which", range(len(SETTINGS)))
def test_edge_texts(text: str, which: int) -> None:
    expected = _ORACLES[which](text)
    tok = AutoTokenizer(**SETTINGS[which])
    assert tok(text) == expected
    assert tok(text) == expected


def test_porter_empty_term_is_kept_like_before() -> None:
    """Porter stems "s" to "": the old pipeline kept that empty term, and so does the memo (twice)."""
    tok = AutoTokenizer("porter")
    assert tok("s dogs s") == ["", "dog", ""]
    assert tok("s dogs s") == ["", "dog", ""]


def test_threads_sharing_a_small_memo_get_the_oracle_terms(monkeypatch: pytest.MonkeyPatch) -> None:
    """Threads filling and emptying one memo never see a word without its final terms."""
    monkeypatch.setattr(tkmod, "TERM_MEMO_SIZE", 16)
    tok, oracle = AutoTokenizer(), Oracle({})
    corpus = [
        f"The Running dogs{i % 37} jumped over fences{i % 11} and café{i % 5} 東京{i % 3}" for i in range(400)
    ]
    expected = [oracle(t) for t in corpus]
    errors: list[str] = []

    def work(offset: int) -> None:
        for j in range(len(corpus)):
            i = (j + offset) % len(corpus)
            got = tok(corpus[i])
            if got != expected[i]:
                errors.append(f"{corpus[i]!r}: {got} != {expected[i]}")

    threads = [threading.Thread(target=work, args=(k * 97,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
