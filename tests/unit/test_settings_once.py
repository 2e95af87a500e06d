"""Each setting is declared once (issue 26): the Finder, the CLI and the evaluation derive their checks and
choices from config.Settings, the vector backends' registry and config.SEARCH_MODES, never a second list."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from finderledge import Finder, Settings, scripts
from finderledge.config import ANY_SCRIPTS, SEARCH_MODES
from finderledge.errors import ConfigurationError
from finderledge.ranking import fusion
from finderledge.registry import Registry


class _Nothing:
    """A keyword/vector index that finds nothing (the Finder is only built here)."""

    def search(self, *_: Any, **__: Any) -> list[tuple[str, float]]:
        return []


def _finder(**options: Any) -> Finder:
    return Finder(_Nothing(), _Nothing(), lambda: None, model_id="onnx-int8:all-MiniLM-L6-v2", **options)  # type: ignore[arg-type]


def _settings_error(**setting: Any) -> str:
    with pytest.raises(ConfigurationError) as refused:
        Settings(**setting)
    return str(refused.value)


@pytest.mark.parametrize(
    "setting",
    [
        {"fusion": "borda"},
        {"min_vector_share": 2.0},
        {"min_vector_share": float("nan")},
        {"vector_scripts": "latin,klingon"},
        {"vector_scripts": ","},
    ],
)
def test_the_finder_refuses_what_settings_refuse_with_the_same_message(setting: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError) as refused:
        _finder(**setting)
    assert str(refused.value) == _settings_error(**setting)


@pytest.mark.parametrize("spelling", ANY_SCRIPTS)
def test_every_spelling_of_any_script_means_any_in_the_finder(spelling: str) -> None:
    assert _finder(vector_scripts=spelling).vector_scripts == scripts.ANY_SCRIPT


def test_a_list_of_scripts_and_auto_resolve_in_the_finder() -> None:
    assert _finder(vector_scripts=" Latin , kana").vector_scripts == frozenset({"latin", "kana"})
    assert _finder(vector_scripts="auto").vector_scripts == frozenset({"latin"})  # MiniLM reads Latin only


def test_script_detection_lives_in_scripts_and_fusion_re_exports_it() -> None:
    for name in ("ANY_SCRIPT", "KNOWN_SCRIPTS", "script_of", "model_scripts", "vector_leg_share"):
        assert getattr(fusion, name) is getattr(scripts, name)
    assert (
        scripts.script_of("あ") == "kana"
        and scripts.vector_leg_share("東京 tower", frozenset({"latin"})) < 0.5
    )


def _choices(parser: argparse.ArgumentParser, command: str, option: str) -> list[str]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    action = next(a for a in sub.choices[command]._actions if option in a.option_strings)
    return list(action.choices or [])


def test_the_cli_offers_every_registered_vector_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    from finderledge import vector_stores
    from finderledge.cli import commands as cli

    backends: Registry[Any] = Registry("vector backend", "vector_store")  # the built-ins, and one more
    for name in vector_stores.backend_names():
        backends.register(name, f"finderledge.vector_stores.{name}:open_{name}")
    monkeypatch.setattr(vector_stores, "BACKENDS", backends)
    vector_stores.register("memory-test", lambda *_a, **_k: None)
    parser = cli.build_parser()
    offered = {command: _choices(parser, command, "--vector-store") for command in ("add", "reindex", "eval")}
    for command, choices in offered.items():
        assert {"chroma", "faiss", "pgvector", "memory-test"} <= set(choices), command
    help_text = " ".join(
        sub.format_help()
        for a in parser._actions
        if isinstance(a, argparse._SubParsersAction)
        for sub in a.choices.values()
    )
    assert "pgvector" in help_text and "memory-test" in help_text


def test_the_cli_and_evaluation_offer_the_search_modes_of_settings() -> None:
    import inspect

    from finderledge import evaluation
    from finderledge.cli import commands as cli

    parser = cli.build_parser()
    assert tuple(_choices(parser, "search", "--mode")) == SEARCH_MODES
    for function in (evaluation.evaluate, evaluation.evaluate_modes, evaluation.evaluate_questions):
        assert tuple(inspect.signature(function).parameters["modes"].default) == SEARCH_MODES


def test_fixed_fusions_come_from_one_table_that_settings_and_fuse_share() -> None:
    from finderledge.config import FUSIONS

    assert set(fusion.FIXED_FUSIONS) == set(FUSIONS) - {"adaptive"}
    ranking = {"vector": [("a", 0.9), ("b", 0.5)], "keyword": [("b", 3.0)]}
    for method in fusion.FIXED_FUSIONS:
        assert {h.id for h in fusion.fuse(method, ranking)} == {"a", "b"}
    with pytest.raises(
        ConfigurationError, match=r"setting 'fusion': expected one of \['rrf', 'relative_score', 'dbsf'\]"
    ):
        fusion.fuse("borda", ranking)


def test_the_reranker_settings_are_settings_declared_once(tmp_path: Any) -> None:
    """rerank_candidates and reranker_on_error: a default, a rule and an environment variable in Settings only."""
    import inspect

    from langchain_core.embeddings import DeterministicFakeEmbedding

    from finderledge import FinderLedge
    from finderledge.engine import open_engine
    from finderledge.reranker import create_reranker

    assert (Settings().rerank_candidates, Settings().reranker_on_error) == (20, "warn")
    for name in ("rerank_candidates", "reranker_on_error"):  # the facade passes None: Settings decides
        assert inspect.signature(FinderLedge).parameters[name].default is None
        assert name not in inspect.signature(open_engine).parameters
    assert _settings_error(rerank_candidates=0) == (
        "setting 'rerank_candidates': expected an integer >= 1, got 0"
    )
    with pytest.raises(ConfigurationError) as refused:
        create_reranker(None, on_error="ignore")
    assert str(refused.value) == _settings_error(reranker_on_error="ignore")
    env = tmp_path / ".env"
    env.write_text("FINDERLEDGE_RERANK_CANDIDATES=7\n", encoding="utf-8")
    with FinderLedge(embedding=DeterministicFakeEmbedding(size=8), env_file=env) as fl:
        assert fl.rerank_candidates == fl.settings.rerank_candidates == 7
        fl.rerank_candidates = 9  # the setter replaces the setting, checked by the same rule
        assert fl.settings.rerank_candidates == 9
        with pytest.raises(ConfigurationError, match="'rerank_candidates'"):
            fl.rerank_candidates = 0
        assert fl.settings.rerank_candidates == 9
    env.write_text("FINDERLEDGE_RERANKER_ON_ERROR=ignore\n", encoding="utf-8")
    with pytest.raises(
        ConfigurationError, match=r"'reranker_on_error' \(from FINDERLEDGE_RERANKER_ON_ERROR in "
    ):
        FinderLedge(embedding=DeterministicFakeEmbedding(size=8), env_file=env)
