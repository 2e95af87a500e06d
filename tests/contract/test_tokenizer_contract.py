"""One contract every keyword tokenizer passes (issue 26, "one registry"): each name in
:data:`finderledge.tokenizer.TOKENIZERS`, built-in or registered, tokenizes deterministically into strings and
records itself so that an index reopens with an identical tokenizer (query tokens must match document tokens).
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from registries import built_in_names

from finderledge import KeywordStore
from finderledge.errors import ConfigurationError
from finderledge.tokenizer import (
    TOKENIZERS,
    AutoTokenizer,
    SimpleTokenizer,
    Tokenizer,
    UnknownTokenizerError,
    register_tokenizer,
    tokenizer_from_dict,
)

TEXTS = [
    "The quick brown foxes are jumping over lazy dogs.",
    "東京都の天気は晴れです。FinderLedgeの使い方",
    "ＦＵＬＬ width Ｌａｔｉｎ and numbers 42, 3.14",
    "北京大学 สวัสดีครับ",
    "",
    "!!! ... ???",
]


class Whitespace:
    """A tokenizer as a user registers one: lower-cased whitespace words, with a minimum length."""

    name = "whitespace-test"

    def __init__(self, min_length: int = 1) -> None:
        self.min_length = min_length

    def __call__(self, text: str) -> list[str]:
        return [w for w in text.lower().split() if len(w) >= self.min_length]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "min_length": self.min_length}


register_tokenizer("whitespace-test", Whitespace)  # an extra name changes nothing for other tests


class TokenizerContract:
    """Subclass with ``make(self) -> Tokenizer`` (the name it is registered under: ``name``)."""

    name = ""

    def make(self) -> Tokenizer:
        raise NotImplementedError

    @pytest.fixture
    def tokenizer(self) -> Tokenizer:
        return self.make()

    def test_is_a_tokenizer_recorded_under_its_registered_name(self, tokenizer: Tokenizer) -> None:
        assert isinstance(tokenizer, Tokenizer)
        spec = tokenizer.to_dict()
        assert spec["name"] == tokenizer.name == self.name and self.name in TOKENIZERS
        assert json.loads(json.dumps(spec)) == spec  # recorded in a manifest as JSON

    def test_tokens_are_strings_and_deterministic(self, tokenizer: Tokenizer) -> None:
        for text in TEXTS:
            tokens = tokenizer(text)
            assert isinstance(tokens, list) and all(isinstance(t, str) and t for t in tokens)
            assert tokenizer(text) == tokens
        assert tokenizer("") == []

    def test_rebuilt_from_its_record_it_tokenizes_identically(self, tokenizer: Tokenizer) -> None:
        again = tokenizer_from_dict(tokenizer.to_dict())
        assert again.to_dict() == tokenizer.to_dict()
        assert [again(t) for t in TEXTS] == [tokenizer(t) for t in TEXTS]

    def test_safe_to_call_from_several_threads(self, tokenizer: Tokenizer) -> None:
        expected = [tokenizer(t) for t in TEXTS]
        seen: list[list[list[str]]] = []

        def run() -> None:
            seen.append([tokenizer(t) for t in TEXTS])

        threads = [threading.Thread(target=run) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert seen == [expected] * 4

    def test_a_keyword_store_reopens_with_it(self, tokenizer: Tokenizer, tmp_path: Any) -> None:
        store = KeywordStore(tmp_path / "bm25", tokenizer=tokenizer)
        store.add(["d1", "d2"], [TEXTS[0], TEXTS[1]])
        store.close()
        reopened = KeywordStore(tmp_path / "bm25")  # no tokenizer given: the recorded one is rebuilt
        assert reopened.search(TEXTS[0], k=1)[0][0] == "d1"
        reopened.close()


class TestAutoTokenizer(TokenizerContract):
    name = "auto"

    def make(self) -> Tokenizer:
        return AutoTokenizer()


class TestSimpleTokenizer(TokenizerContract):
    name = "simple"

    def make(self) -> Tokenizer:
        return SimpleTokenizer()


class TestRegisteredTokenizer(TokenizerContract):
    name = "whitespace-test"

    def make(self) -> Tokenizer:
        return Whitespace(min_length=2)


def test_every_registered_name_has_a_contract_class() -> None:
    covered = {c.name for c in (TestAutoTokenizer, TestSimpleTokenizer)}
    assert built_in_names("finderledge.tokenizer", "TOKENIZERS") == covered
    assert TestRegisteredTokenizer.name in TOKENIZERS


def test_an_unknown_name_names_the_setting_and_the_registered_ones() -> None:
    with pytest.raises(
        UnknownTokenizerError, match=r"setting 'keyword_tokenizer': expected one of \[.*'auto'"
    ):
        tokenizer_from_dict({"name": "nope"})
    assert issubclass(UnknownTokenizerError, ConfigurationError) and issubclass(
        UnknownTokenizerError, ValueError
    )
