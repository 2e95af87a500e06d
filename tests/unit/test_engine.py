"""One engine (issue 26): ``open_engine`` builds the parts once, the write and read paths run on the Engine
alone (no facade), a refused open leaves nothing open, the facade exposes the parts as ``fl.engine``, and
the facade's cluster of modules imports no cycle."""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from finderledge import FinderLedge, Settings
from finderledge.engine import Engine, open_engine
from finderledge.errors import ConfigurationError, IncompatibleIndexError
from finderledge.ingest.write import IngestReport, Writer
from finderledge.ledgers.sqlite import SQLiteLedger
from finderledge.rag import protocols
from finderledge.rag.protocols import SearchableLedger
from finderledge.rag.vectorstore import FinderLedgeVectorStore
from finderledge.ranking.search import Searcher

ROOT = Path(__file__).resolve().parents[2]


def _args(directory: Path, **more: Any) -> dict[str, Any]:
    return {"persist_directory": str(directory), "show_progress": False, **more}


def test_the_write_and_read_paths_run_on_the_engine_alone(tmp_path: Path, fake_embeddings: Any) -> None:
    engine = open_engine(_args(tmp_path / "ix"), embedding=fake_embeddings, env_file=None)
    try:
        assert isinstance(engine, Engine)
        assert engine.directory == tmp_path / "ix" and engine.settings.vector_store == "faiss"
        assert engine.model_id == engine.ledger.get_info("embedding_model_id")  # recorded at open
        report = Writer(engine).ingest(
            [
                Document(page_content="the cat sat on the mat"),
                Document(page_content="stock prices fell sharply"),
            ],
            None,
            include=None,
            exclude=None,
            on_error="raise",
            prune=False,
        )
        assert isinstance(report, IngestReport) and len(report.document_ids) == 2
        hits = Searcher(engine).search(
            "cat on a mat",
            search_mode="keyword",
            k=1,
            filter=None,
            return_parents=False,
            candidate_k=None,
            rerank=True,
            score_threshold=None,
        )
        assert [h.content for h in hits] == ["the cat sat on the mat"]
        assert engine.ledger.counts()["documents"] == 2
    finally:
        engine.close()
    engine.close()  # again: a no-op


def test_a_refused_open_closes_what_it_opened(
    tmp_path: Path, fake_embeddings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "ix"
    FinderLedge(directory, embedding=fake_embeddings, show_progress=False, env_file=None).close()
    closed: list[str] = []
    real_close = SQLiteLedger.close

    def recording_close(self: SQLiteLedger) -> None:
        closed.append("ledger")
        real_close(self)

    monkeypatch.setattr(SQLiteLedger, "close", recording_close)
    with pytest.raises(IncompatibleIndexError, match="was built with embedding model"):
        open_engine(_args(directory), embedding=_OtherModel(size=16), env_file=None)
    assert closed == ["ledger"]  # the model check runs after the ledger opened: it was closed again
    with FinderLedge(directory, embedding=fake_embeddings, show_progress=False, env_file=None) as fl:
        assert fl.count() == {"documents": 0, "chunks": 0}


def test_the_facade_exposes_its_engine_and_shares_its_parts(tmp_path: Path, fake_embeddings: Any) -> None:
    with FinderLedge(tmp_path / "ix", embedding=fake_embeddings, show_progress=False, env_file=None) as fl:
        engine = fl.engine
        assert isinstance(fl, SearchableLedger)
        assert fl.settings is engine.settings and fl.finder is engine.finder
        assert fl.persist_directory == engine.directory
        # the read accessors tests and tools use instead of the engine's shape (fl.engine.ledger …)
        assert fl.ledger is engine.ledger and fl.replica is engine.replica
        assert (
            fl.write_lock is engine.write_lock
            and fl.model_id == engine.model_id == "DeterministicFakeEmbedding"
        )
        assert fl.calibration is None  # nothing measured yet: reading it measures nothing
        fl.rerank_candidates = 7  # the facade's setters change the engine the read path uses
        assert engine.settings.rerank_candidates == 7
        fl.add_texts(["alpha beta", "gamma delta"])
        assert engine.ledger.counts()["documents"] == 2 == len(fl)
    assert engine.closed


def _code_shape() -> Any:
    spec = importlib.util.spec_from_file_location("code_shape", ROOT / "benchmarks" / "code_shape.py")
    assert spec is not None and spec.loader is not None
    shape = importlib.util.module_from_spec(spec)
    sys.modules["code_shape"] = shape
    spec.loader.exec_module(shape)
    return shape


def test_the_facade_cluster_has_no_import_cycle_and_no_private_reach_in() -> None:
    figures = _code_shape().scan(ROOT / "src")
    assert figures["cycles"] == []
    assert figures["slf001"] == 0


def test_code_shape_counts_lazy_imports_and_imports_by_name(tmp_path: Path) -> None:
    """A cycle closed inside a function or by ``importlib.import_module`` with a constant name is a cycle;
    ``from pkg import sub`` depends on the submodule, not on the package's ``__init__``."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from . import top\n", encoding="utf-8")
    (pkg / "top.py").write_text("from .sub import leaf\n", encoding="utf-8")
    (pkg / "sub" / "__init__.py").write_text("", encoding="utf-8")
    (pkg / "sub" / "leaf.py").write_text(
        "import importlib\n\ndef f():\n    return importlib.import_module('..top', __package__)\n",
        encoding="utf-8",
    )
    (pkg / "sub" / "lazy.py").write_text("def g():\n    from .. import top\n", encoding="utf-8")
    (pkg / "sub" / "other.py").write_text(
        "import importlib\nimportlib.import_module('pkg.sub.lazy')\n", encoding="utf-8"
    )
    (pkg / "top2.py").write_text("from .sub import other\n", encoding="utf-8")
    figures = _code_shape().scan(tmp_path)
    assert figures["cycles"] == [["pkg.sub.leaf", "pkg.top"]]  # by name, inside a function
    (pkg / "sub" / "leaf.py").write_text("X = 1\n", encoding="utf-8")
    (pkg / "sub" / "lazy.py").write_text("def g():\n    from .. import top2\n", encoding="utf-8")
    assert _code_shape().scan(tmp_path)["cycles"] == [["pkg.sub.lazy", "pkg.sub.other", "pkg.top2"]]


class _OtherModel(DeterministicFakeEmbedding):
    """Another model class: its recorded id differs from the directory's."""


def test_the_langchain_store_opens_the_ledger_class_the_facade_gave(
    tmp_path: Path, fake_embeddings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store and the facade make each other without the store importing the facade: ``from_texts`` opens
    the class the facade gave ``rag.protocols`` (FinderLedge), and the store refuses anything else as its ledger."""
    store = FinderLedgeVectorStore.from_texts(
        ["alpha beta", "gamma delta"],
        fake_embeddings,
        persist_directory=str(tmp_path / "ix"),
        show_progress=False,
        env_file=None,
    )
    try:
        assert isinstance(store.ledger, FinderLedge) and store.ledger.count()["documents"] == 2
    finally:
        store.ledger.close()
    with pytest.raises(ConfigurationError, match="expected a FinderLedge"):
        FinderLedgeVectorStore(store.ledger.engine)  # type: ignore[arg-type]
    monkeypatch.setattr(protocols, "_ledger_class", [])  # a process that never imported the facade
    with pytest.raises(ConfigurationError, match="from finderledge import FinderLedge"):
        FinderLedgeVectorStore.from_texts(["alpha"], fake_embeddings, env_file=None)


def test_every_setting_is_a_keyword_argument_of_the_facade() -> None:
    """The facade hands ``open_engine`` its arguments by the settings' names: a setting added to
    ``Settings`` without its argument (or renamed in one place) fails here, not silently at open."""
    parameters = set(inspect.signature(FinderLedge).parameters)
    settings = {f.name for f in dataclasses.fields(Settings)}
    assert settings - {"embedding_model"} <= parameters and "embedding" in parameters
