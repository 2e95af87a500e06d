"""Whether a setting is recorded in an index (and pinned when the directory is reopened) is declared once, on
its field in config.Settings (issue 26); the name lists the engine and the facade export derive from it."""

from __future__ import annotations

from dataclasses import fields

from finderledge import engine, facade
from finderledge.config import Settings

# the hand-written lists engine.py held before the flags moved onto the fields (commit 5cc338b)
PREVIOUS_RECORDED = (
    "vector_store",
    "embedding_model",
    "chunk_size",
    "chunk_overlap",
    "chunk_unit",
    "chroma_url",
    "chroma_collection",
    "qdrant_url",
    "qdrant_collection",
    "partition_key",
    "chunk_context",  # issue 42: recorded and pinned, switched by reindex
    "vector_index",  # issue 41: recorded and pinned, switched by reindex
    "keyword_index",  # issue 43: recorded (check --repair repairs the leg built), not pinned
)
PREVIOUS_PINNED = (
    "vector_store",
    "chunk_size",
    "chunk_overlap",
    "chunk_unit",
    "chroma_url",
    "chroma_collection",
    "qdrant_url",
    "qdrant_collection",
    "chunk_context",
    "vector_index",
)


def test_recorded_settings_are_the_previous_list() -> None:
    assert sorted(engine.RECORDED_SETTINGS) == sorted(PREVIOUS_RECORDED)
    assert len(set(engine.RECORDED_SETTINGS)) == len(engine.RECORDED_SETTINGS)


def test_pinned_settings_are_the_previous_list() -> None:
    assert sorted(engine.PINNED_SETTINGS) == sorted(PREVIOUS_PINNED)
    assert len(set(engine.PINNED_SETTINGS)) == len(engine.PINNED_SETTINGS)


def test_facade_still_exports_the_recorded_settings() -> None:
    assert facade.RECORDED_SETTINGS == engine.RECORDED_SETTINGS


def test_the_lists_follow_the_field_flags() -> None:
    """The lists are the flagged fields, in declaration order: flagging a new setting is the only step."""
    flagged = tuple(f.name for f in fields(Settings) if f.metadata.get("recorded"))
    pinned = tuple(f.name for f in fields(Settings) if f.metadata.get("pinned"))
    assert engine.RECORDED_SETTINGS == flagged
    assert engine.PINNED_SETTINGS == pinned
    assert set(pinned) <= set(flagged)  # a pinned setting is one the index recorded
