"""Issue 29: long work is never silent off a terminal (a log line every few seconds with done/total and
rate), and an evaluation interrupted by Ctrl-C reports the queries it finished."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from finderledge import FinderLedge, progress
from finderledge.cli.commands import main
from finderledge.evaluation import EvaluationInterrupted, evaluate
from finderledge.progress import PROGRESS_LOGGER, ProgressLog, heartbeat


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == PROGRESS_LOGGER]


def test_a_line_every_interval_with_done_total_and_rate(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, PROGRESS_LOGGER)
    clock = _Clock()
    log = ProgressLog("embedding chunks", 1000, "chunk", interval=5.0, clock=clock)
    for _ in range(10):
        clock.now += 1.0
        log.update(100)
    log.close()
    assert _lines(caplog) == [
        "embedding chunks: 500/1000 chunk (50 %), 100.0 chunk/s, 5 s",
        "embedding chunks: 1000/1000 chunk (100 %), 100.0 chunk/s, 10 s",
        "embedding chunks: 1000/1000 chunk (100 %), 100.0 chunk/s, 10 s (done)",
    ]


def test_short_work_stays_silent(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, PROGRESS_LOGGER)
    clock = _Clock()
    log = ProgressLog("embedding chunks", 10, "chunk", interval=5.0, clock=clock)
    clock.now += 4.0
    log.update(10)
    log.close()
    assert _lines(caplog) == []


def test_heartbeat_logs_steps_and_beats_while_a_step_runs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, PROGRESS_LOGGER)
    with heartbeat("exporting", interval=0.05) as step:
        step("1/2 tracing")
        deadline = time.monotonic() + 30  # a beat comes every 0.05 s; a loaded machine may hold it back
        while not any(line.startswith("exporting: still 1/2 tracing (") for line in _lines(caplog)):
            assert time.monotonic() < deadline, _lines(caplog)
            time.sleep(0.01)
        step("2/2 quantizing")
    lines = _lines(caplog)
    # a beat may come before the first step is named ("still starting"): the first step line is the first other
    assert next(line for line in lines if not line.startswith("exporting: still ")).startswith(
        "exporting: 1/2 tracing ("
    )
    assert any(line.startswith("exporting: 2/2 quantizing (") for line in lines)
    assert lines[-1].startswith("exporting: done in ")


class _SlowFake(DeterministicFakeEmbedding):
    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        time.sleep(0.01)
        return super().embed_documents(texts)


def test_an_ingest_off_a_terminal_logs_its_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(progress, "INTERVAL", 0.0)  # a line per batch
    caplog.set_level(logging.INFO, PROGRESS_LOGGER)
    texts = [f"passage number {i} about topic {i % 7}" for i in range(40)]
    with FinderLedge(
        tmp_path / "idx", embedding=_SlowFake(size=8), embedding_batch_size=10, env_file=None
    ) as fl:
        fl.add_texts(texts)  # pytest's stderr is not a terminal: no bar, log lines
    lines = [line for line in _lines(caplog) if line.startswith("embedding chunks:")]
    assert lines[:4] == [line for line in lines[:4] if "/40 chunk" in line and "chunk/s" in line]
    assert [line.split(":")[1].split("/")[0].strip() for line in lines[:4]] == ["10", "20", "30", "40"]
    assert lines[-1].endswith("(done)")


def test_the_command_line_shows_progress_lines_by_default_and_not_with_q(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(progress, "INTERVAL", 0.0)
    folder = tmp_path / "docs"
    folder.mkdir()
    for i in range(3):
        (folder / f"f{i}.txt").write_text(f"file {i} talks about refunds and warranty number {i}")
    monkeypatch.setattr(
        "finderledge.embeddings.EmbeddingModelFactory.create_embeddings",
        lambda *a, **k: DeterministicFakeEmbedding(size=8),
    )  # the command line names models; the real one is exercised by the integration tests
    assert main(["add", str(folder), "-d", str(tmp_path / "idx")]) == 0
    err = capsys.readouterr().err
    assert "finderledge: info: indexing files: 3/3 file (100 %)" in err
    assert main(["add", str(folder), "-d", str(tmp_path / "idx2"), "-q"]) == 0
    assert "info:" not in capsys.readouterr().err


def test_the_command_line_prints_a_progress_line_equal_to_an_earlier_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Two batches can log the same line (same count, rate and seconds: a fake model that sleeps a fixed time
    did, and ``test_cli_interrupt`` waited for the second one in vain): progress lines are never dropped as
    repeats; repeated warnings still print once."""
    from finderledge.cli.logs import stderr_logging

    clock = _Clock()
    with stderr_logging(verbosity=0):
        for _ in range(2):  # two batches, each 64 of 256 chunks after 0.3 s
            log = ProgressLog("embedding chunks", 256, "chunk", interval=0.0, clock=clock)
            clock.now += 0.3
            log.update(64)
        for _ in range(2):
            logging.getLogger("pypdf").warning("Ignoring wrong pointing object 6 0 (offset 0)")
    err = capsys.readouterr().err
    assert err.count("embedding chunks: 64/256 chunk (25 %), 213.3 chunk/s, 0 s") == 2, err
    assert err.count("Ignoring wrong pointing object") == 1, err


def _beir(folder: Path, n: int) -> Path:
    folder.mkdir()
    with open(folder / "corpus.jsonl", "w", encoding="utf-8") as fh:
        fh.writelines(
            json.dumps({"_id": f"d{i}", "title": "", "text": f"topic {i} word{i} text"}) + "\n"
            for i in range(n)
        )
    with open(folder / "queries.jsonl", "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps({"_id": f"q{i}", "text": f"word{i}"}) + "\n" for i in range(n))
    (folder / "qrels").mkdir()
    lines = ["query-id\tcorpus-id\tscore"] + [f"q{i}\td{i}\t1" for i in range(n)]
    (folder / "qrels" / "test.tsv").write_text("\n".join(lines) + "\n")
    return folder


def _interrupt_at(monkeypatch: pytest.MonkeyPatch, call: int) -> None:
    """Ctrl-C as Python delivers it (KeyboardInterrupt) in the ``call``-th search."""
    real = FinderLedge.search
    calls = {"n": 0}

    def search(self: FinderLedge, *args: object, **kwargs: object) -> object:
        calls["n"] += 1
        if calls["n"] == call:
            raise KeyboardInterrupt
        return real(self, *args, **kwargs)

    monkeypatch.setattr(FinderLedge, "search", search)


def test_an_interrupted_evaluation_scores_the_queries_it_finished(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _beir(tmp_path / "beir", 12)
    fl = FinderLedge(embedding=DeterministicFakeEmbedding(size=8), env_file=None, show_progress=False)
    # 3 warm-up searches, then 3 modes a query: the 2nd mode of the 6th query is interrupted
    _interrupt_at(monkeypatch, 3 + 5 * 3 + 2)
    with pytest.raises(EvaluationInterrupted) as caught:
        evaluate(data, ledger=fl, show_progress=False)
    stop = caught.value
    assert isinstance(stop, KeyboardInterrupt) and (stop.done, stop.total) == (5, 12)
    report = stop.report
    assert report is not None and report.queries == 5
    assert report.interrupted == "interrupted after 5 of 12 queries"
    for mode in report.modes:
        assert sorted(mode.run) == ["q0", "q1", "q2", "q3", "q4"]
    keyword = next(m for m in report.modes if m.mode == "keyword")
    assert keyword.metrics["Recall@10"] == 1.0  # over the 5 queries run, not 5 of 12
    fl.close()


def test_eval_on_the_command_line_prints_what_it_has_on_ctrl_c(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _beir(tmp_path / "beir", 8)
    monkeypatch.setattr(
        "finderledge.embeddings.EmbeddingModelFactory.create_embeddings",
        lambda *a, **k: DeterministicFakeEmbedding(size=8),
    )
    _interrupt_at(monkeypatch, 3 + 4 * 3 + 1)
    assert main(["eval", str(data), "--modes", "hybrid,vector,keyword"]) == 130
    out, err = capsys.readouterr()
    assert "interrupted after 4 of 8 queries (Ctrl-C): the figures below cover those queries only" in out
    assert out.count("\nkeyword ") == 1 and "nDCG@10" in out
    assert "interrupted after 4 of 8 queries: scoring those" in err


def test_work_that_stops_before_the_end_never_says_done(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 44: after Ctrl-C the last line said "(done)" at 320/585."""
    caplog.set_level(logging.INFO, PROGRESS_LOGGER)
    clock = _Clock()
    log = ProgressLog("embedding chunks", 585, "chunk", interval=1.0, clock=clock)
    clock.now += 2.0
    log.update(320)
    log.close()
    assert _lines(caplog)[-1].endswith("320/585 chunk (55 %), 160.0 chunk/s, 2 s (stopped)")

    def walk() -> None:
        files = progress.logged(list(range(585)), "indexing files", "file")
        try:
            for i in files:
                if i == 320:
                    raise KeyboardInterrupt
        except BaseException:
            files.close()  # as the ingest does: closed while Ctrl-C is handled
            raise

    monkeypatch.setattr(progress, "INTERVAL", 0.0)
    with pytest.raises(KeyboardInterrupt):
        walk()
    assert _lines(caplog)[-1].startswith("indexing files: 320/585 file") and _lines(caplog)[-1].endswith(
        "(interrupted)"
    )
    assert progress.ending(ValueError("disk")) == "failed" and progress.ending(None) == "done"


def test_work_stopped_because_ctrl_c_ended_its_call_ends_interrupted() -> None:
    """A batch embedded ahead on a worker thread is stopped with ``Stopped`` raised from the call's own error:
    its embedding line says why the call ended, not that the model failed."""
    from finderledge.ingest.batches import Stopped, StopSignal

    def stopped_by(reason: BaseException) -> BaseException:
        stop = StopSignal()
        stop.check()  # not set: nothing raised
        stop.set(reason)
        with pytest.raises(Stopped) as caught:
            stop.check()
        return caught.value

    assert progress.ending(stopped_by(KeyboardInterrupt())) == "interrupted"
    assert progress.ending(stopped_by(OSError(28, "No space left on device"))) == "failed"


def test_a_bar_is_drawn_only_on_a_terminal_wide_enough() -> None:
    """Issue 44: on a terminal reporting 0 columns a 204 s ingest showed nothing: log lines there instead."""
    import fcntl
    import os
    import struct
    import termios

    leader, follower = os.openpty()
    try:
        with open(follower, "w", closefd=False) as terminal:
            for columns, drawn in ((0, False), (progress.MIN_BAR_COLUMNS - 1, False), (80, True)):
                fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
                assert progress.bar_fits(terminal) is drawn, columns
    finally:
        os.close(leader)
        os.close(follower)
    with open(os.devnull, "w") as not_a_terminal:
        assert progress.bar_fits(not_a_terminal) is False


def test_a_keyword_index_build_interrupted_says_so(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from finderledge.ledgers import ChunkRecord
    from finderledge.replica import changes

    monkeypatch.setattr(progress, "INTERVAL", 0.0)
    monkeypatch.setattr(changes, "PROGRESS_ABOVE", 3)
    monkeypatch.setattr(changes, "KEYWORD_BATCH", 2)
    caplog.set_level(logging.INFO, PROGRESS_LOGGER)

    class Store:
        calls = 0

        def prepare(self, *args: object) -> object:
            Store.calls += 1
            if Store.calls == 3:
                raise KeyboardInterrupt
            return args

    rows = [ChunkRecord(f"c{i}", "p", i, f"text {i}", {}) for i in range(8)]
    with pytest.raises(KeyboardInterrupt):
        changes.keyword_step(Store(), rows, [], progress=False)  # type: ignore[arg-type]
    assert _lines(caplog)[-1].startswith("keyword index (5,000 chunks a batch): 2/4 batch")
    assert _lines(caplog)[-1].endswith("(interrupted)")
