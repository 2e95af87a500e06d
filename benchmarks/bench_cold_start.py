"""Cold start of ``finderledge list``/``stats``/``search`` on a small default (FAISS) index, old code against new.

    python benchmarks/bench_cold_start.py --old /path/to/old/src [--runs 5] [--dir DIR]

Each command runs in a fresh process, wall clock around ``subprocess.run``; the old and the new source trees
(``PYTHONPATH``) and ``python -c pass`` are interleaved in every round, so both see the same machine load.
The index (two short documents, the default model and store) is built by the new code when ``--dir`` does not
hold one. Prints the medians (seconds) and the load average as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NEW_SRC = Path(__file__).resolve().parent.parent / "src"


def _time(argv: list[str], src: Path) -> float:
    """Seconds one fresh process takes to run ``argv`` with ``src`` first on the path."""
    env = {**os.environ, "PYTHONPATH": str(src), "HF_HUB_OFFLINE": "1"}
    start = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True, env=env)
    return time.perf_counter() - start


def main() -> None:
    """Parse the options, build the index if needed, time the commands and print the medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", type=Path, required=True, help="the old code's src folder")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    directory = args.dir or Path(tempfile.mkdtemp()) / "idx"
    cli = [sys.executable, "-m", "finderledge"]
    if not (directory / "ledger.sqlite3").exists():
        texts = ["refunds within 30 days of purchase", "two years of warranty on batteries"]
        build = [*cli, "add", "--dir", str(directory)] + [a for t in texts for a in ("--text", t)]
        _time(build, NEW_SRC)
    commands = {
        "pass": [sys.executable, "-c", "pass"],
        "list": [*cli, "list", "--dir", str(directory)],
        "stats": [*cli, "stats", "--dir", str(directory)],
        "search": [*cli, "search", "warranty", "--dir", str(directory)],
    }
    times: dict[str, list[float]] = {}
    load_before = os.getloadavg()
    for round_ in range(args.runs):
        versions = [("old", args.old), ("new", NEW_SRC)]
        for version, src in versions if round_ % 2 == 0 else versions[::-1]:
            for name, argv in commands.items():
                if name == "pass" and version == "old":
                    continue
                times.setdefault(f"{name}" if name == "pass" else f"{name}_{version}", []).append(
                    _time(argv, src)
                )
    result = {
        "runs": args.runs,
        "load_before": load_before,
        "load_after": os.getloadavg(),
        "median_s": {k: round(statistics.median(v), 3) for k, v in times.items()},
        "min_s": {k: round(min(v), 3) for k, v in times.items()},
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
