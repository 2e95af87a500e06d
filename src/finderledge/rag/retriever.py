"""A LangChain ``BaseRetriever`` over a FinderLedge, for LCEL chains (``invoke``, ``ainvoke``, ``batch``).

It takes FinderLedge's search options as fields (``k``, ``search_mode``, ``filter`` …) and LangChain's
``search_type``/``search_kwargs`` convention.  Its ``filter`` is a *base filter*: a per-call filter is
AND-ed with it and can never widen or remove it, so a retriever built for one tenant stays with that
tenant whatever its callers pass.  It is fixed when the retriever is built: assigning ``retriever.filter``
or ``model_copy(update={"filter": ...})`` raises (build another retriever instead).
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, PrivateAttr, model_validator

from ..config import SEARCH_MODES
from ..errors import ConfigurationError
from ..filters import and_filters
from ..ranking.mmr import check_mmr_options
from ..ranking.relevance import check_score_threshold
from ..strategies import get_strategy
from ..validation import SEARCH_OPTIONS, check_search_options

__all__ = ["SEARCH_TYPES", "FinderLedgeRetriever", "RetrievedDocument", "and_filters"]

#: LangChain's ``search_type`` names (and FinderLedge's modes) this retriever accepts
SEARCH_TYPES = ("similarity", "similarity_score_threshold", "mmr", *SEARCH_MODES)
_LANGCHAIN_ONLY = {"fetch_k": "candidate_k"}  # LangChain's names for our options (but fetch_k with MMR)
STRATEGY_OPTIONS = ("strategy", "llm", "strategy_on_error")
MMR_OPTIONS = ("mmr", "fetch_k", "lambda_mult")
_KNOWN = {*SEARCH_OPTIONS, "score_threshold", *STRATEGY_OPTIONS, *MMR_OPTIONS}
_FIXED_FILTER = (
    "filter: a retriever's base filter is fixed when it is built (a per-call filter=... narrows it); "
    "build another retriever for another filter"
)
_FILTER_FIELDS = frozenset({"filter", "_base_filter"})


class RetrievedDocument(Document):
    """A retrieved chunk: equal to another exactly when it is the same chunk (same id and text).

    Per-query scores live in its metadata; without this, LangChain wrappers that de-duplicate with ``==``
    (``MultiQueryRetriever``) would keep the same chunk once per query."""

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Document) and self.id is not None and other.id is not None:
            return self.id == other.id and self.page_content == other.page_content
        return super().__eq__(other)

    def __hash__(self) -> int:
        return hash((self.id, self.page_content))


class FinderLedgeRetriever(BaseRetriever):
    """FinderLedge search results as Documents.

    ``FinderLedgeRetriever(ledger=fl, k=3, filter={"user_id": "alice"})`` or ``fl.as_retriever(...)``;
    ``retriever.invoke("質問", k=5, filter={"lang": "ja"})`` overrides the options for one call, except the
    base ``filter``, which every call keeps.  ``search_type="similarity"`` searches in the ledger's default
    mode; ``"similarity_score_threshold"`` requires ``score_threshold`` (0–1); ``"mmr"`` returns relevant chunks
    that do not repeat each other (``search_kwargs``: ``k``, ``fetch_k``, ``lambda_mult``; see
    :meth:`FinderLedge.search <finderledge.facade.FinderLedge.search>`).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    # typed Any so pydantic does not coerce (k=True, k="3"): _settle validates them like search() does
    ledger: Any = Field(exclude=True)
    k: Any = None
    search_mode: Any = None
    mmr: Any = False  # maximal marginal relevance (search_type="mmr"), with fetch_k and lambda_mult
    fetch_k: Any = None
    lambda_mult: Any = None
    filter: Any = Field(default=None, frozen=True)  # the base filter: fixed once built (see __setattr__)
    return_parents: Any = False
    candidate_k: Any = None
    rerank: Any = True
    score_threshold: Any = None
    strategy: Any = None  # multi_query, hyde, decompose (finderledge.strategies), with llm
    llm: Any = Field(default=None, exclude=True)
    strategy_on_error: Any = "fallback"
    search_type: Any = "similarity"
    search_kwargs: Any = Field(default_factory=dict)
    _base_filter: Any = PrivateAttr(
        default=None
    )  # the copy searches use: changing ``filter`` in place does nothing

    @model_validator(mode="after")
    def _settle(self) -> FinderLedgeRetriever:
        """Fold LangChain's ``search_type``/``search_kwargs`` into the fields and validate them once."""
        if not isinstance(self.search_kwargs, dict):
            raise ConfigurationError(
                f"search_kwargs: expected a dict, got {type(self.search_kwargs).__name__}"
            )
        if self.search_type not in SEARCH_TYPES:
            raise ConfigurationError(
                f"search_type: expected one of {list(SEARCH_TYPES)}, got {self.search_type!r}"
            )
        extra = dict(self.search_kwargs)
        if self.search_type == "mmr":
            self.mmr = True
        else:
            for theirs, ours in _LANGCHAIN_ONLY.items():
                if theirs in extra and not (self.mmr or extra.get("mmr")):
                    extra[ours] = extra.pop(theirs)
        unknown = set(extra) - _KNOWN
        if unknown:
            raise ConfigurationError(
                f"search_kwargs: unknown search option(s) {sorted(unknown)}; expected "
                f"{sorted(_KNOWN | set(_LANGCHAIN_ONLY))}"
            )
        # the one place the frozen base filter is set: folding search_kwargs' filter in, during construction
        base = and_filters(self.filter, extra.pop("filter", None))
        self.__dict__["filter"] = copy.deepcopy(base)
        self.__pydantic_private__["_base_filter"] = copy.deepcopy(base)  # type: ignore[index]
        for name, value in extra.items():
            if getattr(self, name) not in (None, False, True, "fallback") and getattr(self, name) != value:
                raise ConfigurationError(
                    f"{name} given twice: {getattr(self, name)!r} and search_kwargs {value!r}"
                )
            setattr(self, name, value)
        self.search_kwargs = {}
        if self.search_type in SEARCH_MODES:
            self.search_mode = self.search_mode or self.search_type
        if self.search_type == "similarity_score_threshold" and self.score_threshold is None:
            raise ConfigurationError(
                "search_type 'similarity_score_threshold': expected search_kwargs={'score_threshold': "
                "a number in [0, 1]}"
            )
        check_search_options({name: getattr(self, name) for name in SEARCH_OPTIONS})
        check_score_threshold(self.score_threshold)
        check_mmr_options(self.mmr, self.fetch_k, self.lambda_mult)
        if self.strategy is not None:
            get_strategy(self.strategy)
            if self.llm is None:
                raise ConfigurationError(
                    f"strategy {self.strategy!r} needs an LLM: pass llm=<a LangChain chat model>"
                )
        return self

    def __setattr__(self, name: str, value: Any) -> None:
        """Options may be changed after construction, except the base filter (a tenant must stay pinned)."""
        if name in _FILTER_FIELDS:
            raise ConfigurationError(_FIXED_FILTER)
        super().__setattr__(name, value)

    def model_copy(
        self, *, update: Mapping[str, Any] | None = None, deep: bool = False
    ) -> FinderLedgeRetriever:
        """A copy (``update`` may change any option but the base filter, as on the original)."""
        if update and _FILTER_FIELDS & set(update):
            raise ConfigurationError(_FIXED_FILTER)
        return super().model_copy(update=update, deep=deep)

    def copy(
        self, *args: Any, **kwargs: Any
    ) -> FinderLedgeRetriever:  # pydantic's deprecated form of model_copy
        """Deprecated pydantic copy: like :meth:`model_copy`, the base filter cannot be updated."""
        if _FILTER_FIELDS & set(kwargs.get("update") or {}):
            raise ConfigurationError(_FIXED_FILTER)
        return super().copy(*args, **kwargs)  # type: ignore[no-any-return]

    def _options(self, call: dict[str, Any]) -> dict[str, Any]:
        """This call's search options: the retriever's, overridden by ``call``; filters AND-ed."""
        unknown = set(call) - _KNOWN
        if unknown:
            raise ConfigurationError(f"unknown search option(s) {sorted(unknown)}; expected {sorted(_KNOWN)}")
        options = {name: getattr(self, name) for name in (*SEARCH_OPTIONS, *STRATEGY_OPTIONS, *MMR_OPTIONS)}
        options.update({k: v for k, v in call.items() if k != "filter"})
        options["filter"] = and_filters(copy.deepcopy(self._base_filter), call.get("filter"))
        threshold = options.pop("score_threshold", self.score_threshold)
        check_score_threshold(threshold)
        if threshold is not None:
            options["score_threshold"] = threshold
        return options

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        return _documents(self.ledger.search(query, **self._options(kwargs)))

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        options = self._options(kwargs)  # validated here, so a bad option raises in the caller's task
        loop = asyncio.get_running_loop()
        return _documents(await loop.run_in_executor(None, lambda: self.ledger.search(query, **options)))


def _documents(results: Any) -> list[Document]:
    return [
        RetrievedDocument(
            page_content=r.document.page_content, metadata=r.document.metadata, id=r.document.id
        )
        for r in results
    ]
