"""Issues 39 and 44: a first ``finderledge add`` interrupted with Ctrl-C (a real SIGINT to a real command
process) keeps the batches it committed and its embedding cache, and running it again picks up where it
stopped; only a directory holding nothing is removed.  The progress lines say the work was interrupted (never
"(done)" part way), and they show on a terminal reporting 0 columns as in a pipe."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import sqlite3
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

HELPER = Path(__file__).resolve().parents[1] / "helpers" / "cli_slow_model.py"
BATCH_FILES = 256  # ingest.STREAM_GROUPS: files per committed batch


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """600 one-chunk files: three batches (256, 256, 88)."""
    from finderledge.ingest.write import STREAM_GROUPS

    assert STREAM_GROUPS == BATCH_FILES
    folder = tmp_path / "corpus"
    folder.mkdir()
    for i in range(600):
        (folder / f"note{i:03d}.txt").write_text(
            f"note {i}: refunds, warranty and shipping, case {i * 7919}\n"
        )
    return folder


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", **extra}


def _documents(directory: Path) -> int:
    """Documents committed in the ledger (read-only, as another process would look)."""
    try:
        with sqlite3.connect(f"file:{directory / 'ledger.sqlite3'}?mode=ro", uri=True) as db:
            return int(db.execute("SELECT COUNT(*) FROM documents").fetchone()[0])
    except sqlite3.Error:
        return 0


def _start(*args: str, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(HELPER), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(**env),
    )


def _second_batch_under_way(err: str) -> bool:
    """The first batch's chunks are all embedded ("(done)") and a later line counts part of the second's."""
    first = err.find("embedding chunks: 256/256 chunk")
    done = err.find("(done)", first) if first >= 0 else -1
    return done >= 0 and re.search(r"embedding chunks: (64|128|192)/256 chunk", err[done:]) is not None


def _wait_until(proc: subprocess.Popen[str], ready: object, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not ready():  # type: ignore[operator]
        assert proc.poll() is None, f"the command ended first: {proc.communicate()}"
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_an_interrupted_first_add_keeps_its_committed_batches_and_the_rerun_picks_up(
    tmp_path: Path, corpus: Path
) -> None:
    directory = tmp_path / "new" / "idx"  # neither exists yet: the command creates both
    log = tmp_path / "stderr.txt"
    release = tmp_path / "release-call-6"
    with open(log, "w") as stderr:
        proc = subprocess.Popen(
            [sys.executable, str(HELPER), "add", str(corpus), "-d", str(directory)],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            text=True,
            # batch 1 is model calls 1-4, batch 2 calls 5-8 (embedded on a worker thread while batch 1 commits):
            # call 6 waits for the test, so batch 2 cannot be committed however fast or loaded the machine is
            env=_env(SLOW_MODEL_SECONDS="0.3", PROGRESS_INTERVAL="0", SLOW_MODEL_HOLD=f"6:{release}"),
        )
        # the first batch is committed and the second has embedded some of its chunks: Ctrl-C. Its first line
        # says 64 (call 5); the worker is inside call 6
        _wait_until(
            proc,
            lambda: _second_batch_under_way(log.read_text()) and _documents(directory) == BATCH_FILES,
        )
        proc.send_signal(signal.SIGINT)
        release.touch()  # call 6 returns; the worker sees the stop before call 7 or after it
        assert proc.wait(timeout=120) == 130
    err = log.read_text()
    assert "finderledge add: interrupted" in err
    kept = re.search(rf"kept \S*idx: it holds {BATCH_FILES} documents and (\d+) cached vectors", err)
    assert kept and int(kept[1]) >= 64, err  # the batch under way: its vectors wait in the embedding cache
    progress = [line for line in err.splitlines() if line.startswith("finderledge: info: ")]
    assert any(line.endswith("(interrupted)") for line in progress), progress
    assert not any(  # "(done)" only where all the work was done
        m and m[1] != m[2] for m in (re.search(r": (\d+)/(\d+) .*\(done\)$", line) for line in progress)
    ), progress
    assert _documents(directory) == BATCH_FILES

    rerun = subprocess.run(
        [sys.executable, str(HELPER), "add", str(corpus), "-d", str(directory), "--no-progress"],
        capture_output=True,
        text=True,
        env=_env(SLOW_MODEL_SECONDS="0.05"),
        timeout=300,
        check=False,
    )
    assert rerun.returncode == 0, rerun.stderr
    assert f"added {600 - BATCH_FILES}, unchanged {BATCH_FILES}" in rerun.stdout
    assert f"embedded {600 - BATCH_FILES - int(kept[1])}, from cache {kept[1]})" in rerun.stdout
    assert "index now holds 600 documents, 600 chunks" in rerun.stdout


def test_an_add_interrupted_before_anything_is_stored_leaves_no_directory(
    tmp_path: Path, corpus: Path
) -> None:
    directory = tmp_path / "new" / "idx"
    started = tmp_path / "embedding-started"
    proc = _start(
        "add", str(corpus), "-d", str(directory), SLOW_MODEL_SECONDS="30", SLOW_MODEL_STARTED=str(started)
    )
    _wait_until(proc, started.exists)  # the first batch of vectors is being computed: nothing is stored
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "kept" not in err
    assert not (tmp_path / "new").exists()  # the folders the command made are gone


def _on_a_terminal(columns: int, *args: str, **env: str) -> str:
    """Run the command on a pseudo-terminal ``columns`` wide; return what it showed."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: the command, its stdout and stderr on the terminal
        os.execve(sys.executable, [sys.executable, str(HELPER), *args], _env(**env))
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    shown = b""
    while True:
        ready, _, _ = select.select([fd], [], [], 120)
        if not ready:
            os.kill(pid, signal.SIGKILL)
            break
        try:
            data = os.read(fd, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        shown += data
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, shown.decode(errors="replace")
    return shown.decode(errors="replace")


def test_progress_shows_on_a_terminal_with_0_columns_and_in_a_pipe(tmp_path: Path, corpus: Path) -> None:
    shown = _on_a_terminal(
        0, "add", str(corpus), "-d", str(tmp_path / "a"), SLOW_MODEL_SECONDS="0.01", PROGRESS_INTERVAL="0"
    )
    assert "finderledge: info: embedding chunks: 64/256 chunk" in shown, shown[-2000:]
    assert "finderledge: info: indexing files: 600/600 file (100 %)" in shown
    assert "(done)" in shown and "\r" not in shown.replace("\r\n", "")  # lines, no bar redrawn in place
    wide = _on_a_terminal(
        120, "add", str(corpus), "-d", str(tmp_path / "b"), SLOW_MODEL_SECONDS="0.01", PROGRESS_INTERVAL="0"
    )
    assert "Indexing files" in wide and "finderledge: info: embedding chunks" not in wide  # a bar
    piped = subprocess.run(
        [sys.executable, str(HELPER), "add", str(corpus), "-d", str(tmp_path / "c")],
        capture_output=True,
        text=True,
        env=_env(SLOW_MODEL_SECONDS="0.01", PROGRESS_INTERVAL="0"),
        timeout=300,
        check=False,
    )
    assert piped.returncode == 0 and "finderledge: info: embedding chunks: 64/256 chunk" in piped.stderr
