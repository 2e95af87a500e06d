"""Tests for finderledge.tokenizer (real PyStemmer and SudachiPy, no mocks)."""

from __future__ import annotations

import threading

import pytest

from finderledge import tokenizer as tkmod
from finderledge.tokenizer import (
    AutoTokenizer,
    SimpleTokenizer,
    Tokenizer,
    register_tokenizer,
    tokenizer_from_dict,
)


@pytest.fixture(scope="module")
def auto() -> AutoTokenizer:
    return AutoTokenizer()


def test_english_lowercase_stopwords_and_stemming(auto: AutoTokenizer) -> None:
    assert auto("The Running dogs are jumping over THE fences") == ["run", "dog", "jump", "over", "fenc"]


def test_english_options_turn_stemming_and_stopwords_off() -> None:
    tok = AutoTokenizer(stem=False, stopwords=False)
    assert tok("The Running dogs") == ["the", "running", "dogs"]
    own = AutoTokenizer(stem=False, stopwords=["dogs"])
    assert own("The Running dogs") == ["the", "running"]


def test_other_stemmer_language() -> None:
    tok = AutoTokenizer("german")
    assert tok("Häuser") == tok("Haus") or tok("Häusern") == tok("Häuser")
    with pytest.raises(ValueError, match="stemmer"):
        AutoTokenizer("klingon")


def test_nfkc_full_width_latin_is_folded(auto: AutoTokenizer) -> None:
    assert auto("ＡＢＣ　Ｄｏｇｓ") == auto("abc dogs") == ["abc", "dog"]


def test_japanese_uses_sudachi_normalized_forms_and_drops_particles(auto: AutoTokenizer) -> None:
    toks = auto("東京都庁に行った。")
    assert "行く" in toks  # normalized form of 行っ
    assert "に" not in toks and "た" not in toks and "。" not in toks
    assert "都庁" in toks


def test_mixed_japanese_and_english(auto: AutoTokenizer) -> None:
    toks = auto("FinderLedgeの使い方")
    assert auto("FinderLedge") == ["finderledg"]
    assert "finderledg" in toks
    assert "使い方" in toks or {"使い", "方"} <= set(toks)
    # English words inside Japanese text get the English pipeline (stop words + stemming).
    assert "run" in auto("Running the testsを実行する")
    assert "the" not in auto("Running the testsを実行する")


def test_japanese_pronouns_and_question_words_are_dropped(auto: AutoTokenizer) -> None:
    question = "東京タワーを設計したのは誰ですか?どこにありますか?"
    toks = auto(question)
    assert "誰" not in toks and "どこ" not in toks
    assert {"東京", "タワー", "設計"} <= set(toks)
    kept = AutoTokenizer(drop_pronouns=False)(question)
    assert "誰" in kept and set(kept) - set(toks) == {"誰", "どこ"}  # only the pronouns differ


def test_index_recorded_before_drop_pronouns_reopens_as_built() -> None:
    legacy = AutoTokenizer().to_dict()
    del legacy["drop_pronouns"]  # what an index written before the setting existed records
    reopened = tokenizer_from_dict(legacy)
    assert isinstance(reopened, AutoTokenizer) and reopened.drop_pronouns is False
    assert "誰" in reopened("誰が作ったの?")
    assert tokenizer_from_dict(AutoTokenizer().to_dict()).drop_pronouns is True


def test_kanji_only_text_is_ambiguous_bigrams_by_default() -> None:
    assert AutoTokenizer()("東京都庁") == ["東京", "京都", "都庁"]
    assert AutoTokenizer(japanese="always")("東京都庁") != ["東京", "京都", "都庁"]
    assert AutoTokenizer(japanese="never")("東京に行く") == ["東京", "京に", "に行", "行く"]


def test_chinese_and_thai_fall_back_to_bigrams(auto: AutoTokenizer) -> None:
    assert auto("中文abc测试") == ["中文", "abc", "测试"]
    thai = auto("สวัสดี")
    assert thai == ["สว", "วั", "ัส", "สด", "ดี"]
    assert auto("中") == ["中"]


def test_long_japanese_text_is_chunked_below_sudachi_limit(auto: AutoTokenizer) -> None:
    sentence = "東京都庁に行った。"
    text = sentence * 8000  # ~216 KB, far above Sudachi's 49,149-byte limit
    assert len(text.encode("utf-8")) > 49_149
    toks = auto(text)
    assert toks.count("行く") == 8000
    # A single giant "sentence" with no punctuation is hard-cut and still tokenized.
    assert len(auto("あ" * 30_000)) > 0


def test_split_for_sudachi_respects_limit() -> None:
    text = ("日本語の文です。" * 3000) + ("い" * 20000)
    pieces = tkmod._split_for_sudachi(text, limit=1000)
    assert "".join(pieces) == text
    assert max(len(p.encode("utf-8")) for p in pieces) <= 1000


def test_sudachi_dictionary_and_tokenizer_created_once_per_thread(auto: AutoTokenizer) -> None:
    auto("日本語")
    first = tkmod._sudachi_tokenizer("A")
    dictionary = tkmod._sudachi_dictionary
    auto("もう一度日本語")
    assert tkmod._sudachi_tokenizer("A") is first
    assert tkmod._sudachi_dictionary is dictionary
    other: list[object] = []
    t = threading.Thread(target=lambda: other.append(tkmod._sudachi_tokenizer("A")))
    t.start()
    t.join()
    assert other[0] is not first  # per thread, so no sharing across threads
    assert tkmod._sudachi_dictionary is dictionary


def test_split_modes_differ() -> None:
    a = AutoTokenizer(split_mode="A")("国立国会図書館に行った")
    c = AutoTokenizer(split_mode="C")("国立国会図書館に行った")
    assert len(a) > len(c)


def test_to_dict_round_trip_and_protocol() -> None:
    tok = AutoTokenizer(stem=False, stopwords=["foo"], japanese="always", split_mode="C", min_length=2)
    again = tokenizer_from_dict(tok.to_dict())
    assert isinstance(again, AutoTokenizer) and again.to_dict() == tok.to_dict()
    text = "Foo bar baz 東京都庁 a"
    assert again(text) == tok(text)
    assert isinstance(tok, Tokenizer) and isinstance(SimpleTokenizer(), Tokenizer)
    assert tokenizer_from_dict({"name": "simple"})("A b") == ["a", "b"]
    with pytest.raises(ValueError, match="setting .keyword_tokenizer.: expected one of"):
        tokenizer_from_dict({"name": "nope"})


def test_register_custom_tokenizer() -> None:
    class Upper:
        name = "upper-test"

        def __call__(self, text: str) -> list[str]:
            return text.upper().split()

        def to_dict(self) -> dict[str, str]:
            return {"name": self.name}

    register_tokenizer("upper-test", Upper)
    assert tokenizer_from_dict({"name": "upper-test"})("a b") == ["A", "B"]


def test_invalid_options() -> None:
    with pytest.raises(ValueError):
        AutoTokenizer(japanese="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        AutoTokenizer(split_mode="D")  # type: ignore[arg-type]


def test_empty_and_punctuation_only(auto: AutoTokenizer) -> None:
    assert auto("") == []
    assert auto("!!! ... ---") == []
    assert auto("。、！") == []
