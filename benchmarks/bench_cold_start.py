"""Cold start of ``finderledge list``/``stats``/``search`` and the first API search on a small index, per vector store.

    python benchmarks/bench_cold_start.py [--store faiss|chroma|both] [--old /path/to/old/src] [--runs 5]
        [--dir DIR] [--out benchmarks/results/cold_start_stores.json] [--exit-cost] [--importtime]

Per store (``--store``, default faiss; ``both`` measures FAISS and Chroma in the same run) a small index is built
by the current code in ``DIR/<store>`` when it does not hold one: two short documents, the default model,
``finderledge add --vector-store <store>``.  Then every round times, each command in a fresh process (wall clock
around ``subprocess.run``):

- ``pass``:          ``python -c pass`` (the interpreter's own start, once per round)
- ``list``:          ``python -m finderledge list --dir DIR/<store>``
- ``stats``:         ``python -m finderledge stats --dir DIR/<store>``
- ``search``:        ``python -m finderledge search warranty --dir DIR/<store>`` (hybrid, the default model)
- ``api_search``:    ``import finderledge; FinderLedge(DIR/<store>).search("warranty")`` (the Python API path)

The stores (and, with ``--old``, the old and the current source trees, ``PYTHONPATH``) are interleaved in every
round, their order rotating from one round to the next, so each sees the same machine load.  Without ``--old``
only the current tree (this checkout's ``src``) is measured.  Prints, and with ``--out`` writes, the medians,
minima and maxima (seconds) and the load average (``os.getloadavg``) before and after as JSON; keys are
``<store>.<command>`` for the current tree and ``<store>.<command>_old`` for the old one; ``under_1_5_s`` says
which medians meet issue 29's target.  ``--importtime`` adds, per store, the top-level imports of one more
``search`` run (``python -X importtime``, after the timed rounds): where a store's extra time goes (for Chroma,
also the phases of opening its files with chromadb alone, median of 3 fresh processes);
``--exit-cost`` splits each CLI command (median of 3 more runs) into the time until the command returns and the
interpreter's shutdown after it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NEW_SRC = Path(__file__).resolve().parent.parent / "src"
STORES = ("faiss", "chroma")
TEXTS = ("refunds within 30 days of purchase", "two years of warranty on batteries")
QUERY = "warranty"


def _time(argv: list[str], src: Path) -> float:
    """Seconds one fresh process takes to run ``argv`` with ``src`` first on the path."""
    env = {**os.environ, "PYTHONPATH": str(src), "HF_HUB_OFFLINE": "1"}
    start = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True, env=env)
    return time.perf_counter() - start


def build_index(directory: Path, store: str) -> float | None:
    """Build the two-document index of ``store`` in ``directory`` with the current code; seconds, None if present."""
    if (directory / "ledger.sqlite3").exists():
        return None
    build = [sys.executable, "-m", "finderledge", "add", "--dir", str(directory), "--vector-store", store]
    build += [a for text in TEXTS for a in ("--text", text)]
    return _time(build, NEW_SRC)


def store_commands(directory: Path) -> dict[str, list[str]]:
    """The timed commands (name -> argv) on the index in ``directory``."""
    cli = [sys.executable, "-m", "finderledge"]
    api = (
        "import finderledge; "
        f"fl = finderledge.FinderLedge({str(directory)!r}, show_progress=False); "
        f"assert len(fl.search({QUERY!r})) > 0"
    )
    return {
        "list": [*cli, "list", "--dir", str(directory)],
        "stats": [*cli, "stats", "--dir", str(directory)],
        "search": [*cli, "search", QUERY, "--dir", str(directory)],
        "api_search": [sys.executable, "-c", api],
    }


def top_imports(argv: list[str], src: Path, floor_ms: float = 20.0) -> dict[str, float]:
    """Milliseconds of each top-level import (``python -X importtime``) of one run of ``argv``, those >= ``floor_ms``.

    Cumulative wall time per import started outside any other import; imports running in threads at the same
    time (the model loads while the indexes open) overlap, so the figures show where time goes, not a sum."""
    env = {**os.environ, "PYTHONPATH": str(src), "HF_HUB_OFFLINE": "1"}
    run = subprocess.run(
        [argv[0], "-X", "importtime", *argv[1:]], check=True, capture_output=True, env=env, text=True
    )
    found: dict[str, float] = {}
    for line in run.stderr.splitlines():
        match = re.match(r"import time:\s+-?\d+ \|\s+(\d+) \| (\S+)$", line)  # no indent: top level
        if match and int(match[1]) / 1000 >= floor_ms:
            found[match[2]] = round(found.get(match[2], 0.0) + int(match[1]) / 1000, 1)
    return dict(sorted(found.items(), key=lambda item: -item[1]))


EXIT_PROBE = (
    "import runpy, sys, time\n"
    "sys.argv = ['finderledge', *sys.argv[1:]]\n"
    "try:\n"
    "    runpy.run_module('finderledge', run_name='__main__', alter_sys=True)\n"
    "except SystemExit:\n"
    "    pass\n"
    "sys.stderr.write(f'\\nRETURNED {time.monotonic()!r}\\n')\n"
)


def exit_cost(argv: list[str], src: Path, repeats: int = 3) -> dict[str, float]:
    """Median seconds of ``argv`` (a ``python -m finderledge`` command) up to the command's return, and after it.

    The command runs as ``python -m finderledge`` would, then prints the (system-wide) monotonic clock; what
    follows until the process has ended is the interpreter's shutdown (atexit, modules, extensions)."""
    env = {**os.environ, "PYTHONPATH": str(src), "HF_HUB_OFFLINE": "1"}
    to_return, after = [], []
    for _ in range(repeats):
        start = time.monotonic()
        run = subprocess.run(
            [argv[0], "-c", EXIT_PROBE, *argv[3:]], check=True, capture_output=True, env=env, text=True
        )
        end = time.monotonic()
        returned = float(run.stderr.rsplit("RETURNED ", 1)[1])
        to_return.append(returned - start)
        after.append(end - returned)
    return {
        "to_return_s": round(statistics.median(to_return), 3),
        "shutdown_s": round(statistics.median(after), 3),
    }


CHROMA_PHASES = (
    "import json, sys, time\n"
    "t0 = time.perf_counter()\n"
    "import chromadb\n"
    "from chromadb.config import Settings\n"
    "t1 = time.perf_counter()\n"
    "client = chromadb.PersistentClient(sys.argv[1], settings=Settings(anonymized_telemetry=False))\n"
    "t2 = time.perf_counter()\n"
    "collection = client.get_collection('finderledge')\n"
    "collection.count()\n"
    "t3 = time.perf_counter()\n"
    "collection.query(query_embeddings=[[0.1] * 384], n_results=2)\n"
    "t4 = time.perf_counter()\n"
    "print(json.dumps({'import_chromadb': t1 - t0, 'persistent_client': t2 - t1,\n"
    "                  'collection_count': t3 - t2, 'first_query': t4 - t3}))\n"
)


def chroma_phases(directory: Path, repeats: int = 3) -> dict[str, float]:
    """Median seconds of the phases of opening the Chroma files FinderLedge wrote (``DIR/chroma/chroma``)
    with chromadb alone, each repeat in a fresh process: its import, the persistent client, the collection and
    its count (what FinderLedge's Chroma store does when it opens), and a first query."""
    runs = []
    for _ in range(repeats):
        run = subprocess.run(
            [sys.executable, "-c", CHROMA_PHASES, str(directory / "chroma")],
            check=True,
            capture_output=True,
            text=True,
        )
        runs.append(json.loads(run.stdout))
    return {key: round(statistics.median(r[key] for r in runs), 3) for key in runs[0]}


def rotated(items: list[tuple[str, str, Path]], round_: int) -> list[tuple[str, str, Path]]:
    """``items`` rotated by ``round_`` places, so no store or tree always runs first."""
    shift = round_ % len(items)
    return items[shift:] + items[:shift]


def summary(times: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    """Median, min and max (seconds, rounded) of each timed key."""
    return {
        stat: {key: round(fn(values), 3) for key, values in times.items()}
        for stat, fn in (("median_s", statistics.median), ("min_s", min), ("max_s", max))
    }


def main() -> None:
    """Parse the options, build the indexes if needed, time the commands and print (and write) the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", type=Path, default=None, help="an old code's src folder, timed as well")
    parser.add_argument("--store", choices=[*STORES, "both"], default="faiss")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=None, help="folder of the indexes (DIR/<store>)")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    parser.add_argument(
        "--exit-cost",
        action="store_true",
        help="also record how much of each CLI command is interpreter shutdown",
    )
    parser.add_argument(
        "--importtime", action="store_true", help="also record each store's top-level imports of one search"
    )
    args = parser.parse_args()
    root = args.dir or Path(tempfile.mkdtemp())
    stores = list(STORES) if args.store == "both" else [args.store]
    build_s = {store: build_index(root / store, store) for store in stores}
    versions = [("new", NEW_SRC)] + ([("old", args.old)] if args.old else [])
    slots = [(store, version, src) for version, src in versions for store in stores]
    times: dict[str, list[float]] = {}
    load_before = os.getloadavg()
    for round_ in range(args.runs):
        times.setdefault("pass", []).append(_time([sys.executable, "-c", "pass"], NEW_SRC))
        for store, version, src in rotated(slots, round_):
            suffix = "_old" if version == "old" else ""
            for name, argv in store_commands(root / store).items():
                times.setdefault(f"{store}.{name}{suffix}", []).append(_time(argv, src))
    result = {
        "command": "python " + " ".join(sys.argv),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "runs": args.runs,
        "stores": stores,
        "old": str(args.old) if args.old else None,
        "query": QUERY,
        "build_s": {k: None if v is None else round(v, 3) for k, v in build_s.items()},
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        **summary(times),
    }
    result["under_1_5_s"] = {key: value < 1.5 for key, value in result["median_s"].items() if key != "pass"}
    if args.exit_cost:  # after the timed rounds, so it cannot disturb them
        result["exit_cost"] = {
            f"{store}.{name}": exit_cost(argv, NEW_SRC)
            for store in stores
            for name, argv in store_commands(root / store).items()
            if name != "api_search"
        }
    if args.importtime:  # after the timed rounds, so it cannot disturb them
        result["search_top_imports_ms"] = {
            store: top_imports(store_commands(root / store)["search"], NEW_SRC) for store in stores
        }
        if "chroma" in stores:
            result["chroma_open_phases_s"] = chroma_phases(root / "chroma")
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
