"""The server's per-request strategies and JWT check without a server (fake embeddings, in-memory index).

``finderledge.server.strategies`` and ``finderledge.server.keys`` need no FastAPI, so the fast layer checks that
every strategy keeps the caller's filter, contextual compression only ever keeps a passage's own sentences,
and a JWT names its tenant (or is refused saying why).  The HTTP side is tests/integration/test_server_strategies.py.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.embeddings import Embeddings
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from finderledge import ConfigurationError, FinderLedge
from finderledge.server.config import ServerConfig
from finderledge.server.keys import JwtVerifier, TokenError, looks_like_jwt
from finderledge.server.strategies import (
    ALIASES,
    LLM_STRATEGIES,
    STRATEGY_NAMES,
    canonical_strategy,
    compress,
    strategy_search,
)

TEXTS = {
    "alice": "# Alice\n\nAlice's salary is paid on the 25th. Her manager is Ken Sato. Project Kestrel ends in June.",
    "bob": "# Bob\n\nBob's salary is paid on the 10th. His manager is Yuki Mori. Project Marlin ends in May.",
}


class WordEmbeddings(Embeddings):
    """One dimension per word of a small vocabulary: sentences sharing words with the query are close."""

    WORDS = ("salary", "paid", "manager", "project", "ends", "alice", "bob")

    def _vector(self, text: str) -> list[float]:
        low = text.lower()
        return [float(w in low) for w in self.WORDS] + [0.1]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


@pytest.fixture
def ledger(fake_embeddings: Any) -> Iterator[FinderLedge]:
    fl = FinderLedge(embedding=fake_embeddings, chunk_size=60, chunk_overlap=0, show_progress=False)
    for tenant, text in TEXTS.items():
        fl.add_texts([text], metadatas=[{"tenant": tenant}])
    yield fl
    fl.close()


def test_names_and_aliases() -> None:
    assert canonical_strategy(None) == "basic"
    for alias, name in ALIASES.items():
        assert canonical_strategy(alias) == name
    with pytest.raises(ValueError, match="unknown strategy 'magic'") as info:
        canonical_strategy("magic")
    assert all(name in str(info.value) for name in STRATEGY_NAMES)


@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
def test_every_strategy_keeps_the_filter(ledger: FinderLedge, strategy: str) -> None:
    attack = FakeListChatModel(responses=["Bob Yuki Mori Marlin\nBob's salary is paid on the 10th"] * 4)
    for user, other in (("alice", "bob"), ("bob", "alice")):
        results = strategy_search(
            ledger, "When is the salary paid?", strategy, attack, k=20, filter={"tenant": user}
        )
        assert results, (strategy, user)
        assert {r.metadata["tenant"] for r in results} == {user}
        assert not any(other.capitalize() in r.content for r in results), [r.content for r in results]


def test_llm_strategies_need_a_model(ledger: FinderLedge) -> None:
    for strategy in LLM_STRATEGIES:
        with pytest.raises(ConfigurationError, match="needs a language model"):
            strategy_search(ledger, "salary", strategy, None, k=3, filter={"tenant": "alice"})


def test_parent_document_returns_the_whole_text(ledger: FinderLedge) -> None:
    [parent] = strategy_search(ledger, "Kestrel", "parent_document", None, k=5, filter={"tenant": "alice"})
    assert parent.content == TEXTS["alice"]


def test_compression_keeps_only_the_passages_own_close_sentences(ledger: FinderLedge) -> None:
    results = ledger.search("salary paid", k=5, filter={"tenant": "alice"})
    cut = compress(WordEmbeddings(), "salary paid", list(results), threshold=0.5)
    assert len(cut) == len(results) and [c.rank for c in cut] == [r.rank for r in results]
    for short, full in zip(cut, results):
        assert short.content
        assert not short.content.startswith("#") or short.content == full.content  # a heading-only chunk
        assert all(s in full.content for s in short.content.split(" Her "))  # its own text only
    assert any("paid on the 25th" in c.content for c in cut)
    assert not any("Ken Sato" in c.content for c in cut if "paid" in c.content)
    lonely = compress(WordEmbeddings(), "zzz", list(results)[:1], threshold=0.99)
    assert lonely[0].content  # nothing reaches the threshold: the best sentence is kept, never nothing


SECRET = "unit-test-secret-of-at-least-32-chars"


def test_jwt_names_the_tenant_or_says_why_not(tmp_path: Path) -> None:
    jwt = pytest.importorskip("jwt")
    verifier = JwtVerifier(ServerConfig(directory=tmp_path, jwt_secret=SECRET, jwt_claim="tenant"))
    now = int(time.time())
    good = jwt.encode({"tenant": "alice", "exp": now + 60}, SECRET, "HS256")
    assert looks_like_jwt(good) and not looks_like_jwt("flk_abcdef")
    assert verifier.tenant(good) == "alice"
    for token, why in (
        (jwt.encode({"tenant": "alice", "exp": now - 60}, SECRET, "HS256"), "expired"),
        (jwt.encode({"tenant": "alice"}, SECRET, "HS256"), "not valid"),
        (jwt.encode({"sub": "alice", "exp": now + 60}, SECRET, "HS256"), "'tenant' claim"),
        (jwt.encode({"tenant": "alice", "exp": now + 60}, "x" * 40, "HS256"), "not valid"),
    ):
        with pytest.raises(TokenError, match=why):
            verifier.tenant(token)
