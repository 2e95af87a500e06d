"""Issue 42: ``finderledge add`` shows the calibration its write starts (it finishes before the command exits, as
the writing process always calibrated at close) as ``finderledge.progress`` lines, also when stderr is not a
terminal (here a pipe).  The interval is set to 0 so that the short calibration of a small corpus logs too."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

RUN = (
    "import sys\nimport finderledge.progress as progress\nprogress.INTERVAL = 0.0\n"
    "from finderledge.cli.commands import main\nraise SystemExit(main(sys.argv[1:]))\n"
)


def test_add_logs_the_calibration_progress_to_a_pipe(tmp_path: Path, minilm: Any) -> None:
    minilm.embed_query("build the session's model cache first")  # the command line loads the same export
    folder = tmp_path / "notes"
    folder.mkdir()
    for i in range(150):
        (folder / f"note{i}.txt").write_text(
            f"Note {i} describes the orchard near river bend {i}. The keeper counted {i} old pear trees there.",
            encoding="utf-8",
        )
    done = subprocess.run(
        [sys.executable, "-c", RUN, "add", str(folder), "--dir", str(tmp_path / "ix"), "--no-progress"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if "calibrating the search legs: " in line]
    assert lines and "(done)" in lines[-1], done.stderr[-3000:]
