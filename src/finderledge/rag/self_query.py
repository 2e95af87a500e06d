"""A LangChain structured-query translator for FinderLedge's filter language, for ``SelfQueryRetriever``.

``SelfQueryRetriever.from_llm(llm, fl.as_vectorstore(), ..., structured_query_translator=FinderLedgeTranslator())``
turns the LLM's ``and(eq("lang", "ja"), gte("year", 2020))`` into ``{"$and": [{"lang": {"$eq": "ja"}}, ...]}``.
Comparators FinderLedge cannot express exactly (``like``; ``not`` of a sub-filter) are refused by
LangChain's parser before a query runs, never approximated.
"""

from __future__ import annotations

from typing import Any

from langchain_core.structured_query import (
    Comparator,
    Comparison,
    Operation,
    Operator,
    StructuredQuery,
    Visitor,
)

__all__ = ["FinderLedgeTranslator"]

_COMPARATORS = {
    Comparator.EQ: "$eq",
    Comparator.NE: "$ne",
    Comparator.GT: "$gt",
    Comparator.GTE: "$gte",
    Comparator.LT: "$lt",
    Comparator.LTE: "$lte",
    Comparator.IN: "$in",
    Comparator.NIN: "$nin",
    Comparator.CONTAIN: "$contains",
}
_OPERATORS = {Operator.AND: "$and", Operator.OR: "$or"}


class FinderLedgeTranslator(Visitor):
    """Structured query → FinderLedge filter (see docs/filters.md)."""

    allowed_comparators = tuple(Comparator(c) for c in _COMPARATORS)
    allowed_operators = tuple(Operator(o) for o in _OPERATORS)

    def visit_operation(self, operation: Operation) -> dict[str, Any]:
        self._validate_func(operation.operator)
        return {_OPERATORS[operation.operator]: [arg.accept(self) for arg in operation.arguments]}

    def visit_comparison(self, comparison: Comparison) -> dict[str, Any]:
        self._validate_func(comparison.comparator)
        value = comparison.value
        if comparison.comparator in (Comparator.IN, Comparator.NIN) and not isinstance(value, list):
            value = [value]
        return {comparison.attribute: {_COMPARATORS[comparison.comparator]: value}}

    def visit_structured_query(self, structured_query: StructuredQuery) -> tuple[str, dict[str, Any]]:
        if structured_query.filter is None:
            return structured_query.query, {}
        return structured_query.query, {"filter": structured_query.filter.accept(self)}
