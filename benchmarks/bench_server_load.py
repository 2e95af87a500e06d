"""Load test of ``finderledge serve --workers 2`` with Locust: latency, throughput, failures, lost uploads.

A real server process over a fresh index (seeded with examples/data/guides, English and Japanese) takes
many concurrent searchers (search in every mode, some narrowed by tags/ids/filters, chat plain and
streamed, listing) and ONE uploader that uploads small distinct files for the whole run, recording each
created document id with a unique marker word (benchmarks/locustfile.py).  Locust runs headless in a
subprocess.  Afterwards every recorded upload must be listed and found by its marker word by keyword search,
with and without a filter on its document id, and the server log must hold no error.

    python benchmarks/bench_server_load.py [--users 24] [--duration 90] [--workers 2] [--out PATH]
    python benchmarks/bench_server_load.py --hostile --users 16 --duration 90   # plain run, then the hostile mix

``--hostile`` (issue 28) runs the same load twice on fresh servers: plain, then with one more user sending
the hostile mix in turn (a zip-bomb DOCX, a 200,000-row CSV, a 100-page PDF, a search with a 50,000-value
filter; tests/helpers/hostile_files.py).  It must see zero 5xx and zero dropped connections (a failure in
Locust's count), the searchers' p99 is reported next to the plain run's, and every accepted PDF must end
``indexed`` or ``failed`` with a reason.  Writes benchmarks/results/server_load_hostile.json.

Writes benchmarks/results/server_load.json (p50/p99 per endpoint, requests/s, failures, the after-check).
tests/e2e/test_server_load.py runs the short form (about 8 users for 25 s) through :func:`measure`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for _folder in (ROOT / "tests", ROOT / "tests" / "helpers"):
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))

from hostile_files import write_hostile_files
from server_process import running_server

SEARCH_ENDPOINTS = ("POST search en", "POST search ja", "POST search filtered")

LOCUSTFILE = HERE / "locustfile.py"
GUIDES = ROOT / "examples" / "data" / "guides"
SEED_TAGS = {"billing-faq.md": "billing,guide", "sla-ja.md": "ja,guide", "datacenter-ja.txt": "ja,guide"}
EXTRA = [  # a few more small documents, so searches rank among more than the guides
    (
        "shipping.md",
        "# Shipping\n\nOrders ship within two business days. The shipping schedule is posted weekly.\n",
    ),
    (
        "security.md",
        "# Security\n\nTwo-factor authentication protects every account. Enable it under Settings.\n",
    ),
    (
        "invoices.txt",
        "Invoices are emailed on the first of the month. Change the billing address in Billing.\n",
    ),
    ("配送.txt", "ご注文は2営業日以内に発送されます。配送の予定は毎週掲載されます。\n"),
    ("障害.md", "# 障害対応\n\n障害時の連絡先はサポート窓口です。稼働率は99.9%を保証します。\n"),
]


def _headers(key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}


def seed(url: str, key: str | None = None) -> list[str]:
    """Upload the guides and a few more documents; their ids."""
    files = [(p.name, p.read_bytes()) for p in sorted(GUIDES.iterdir()) if p.is_file()]
    files += [(name, text.encode("utf-8")) for name, text in EXTRA]
    ids = []
    with httpx.Client(base_url=url, timeout=120, headers=_headers(key)) as client:
        for name, data in files:
            r = client.post(
                "/api/v1/documents",
                files={"file": (name, data, "application/octet-stream")},
                data={"tags": SEED_TAGS.get(name, "guide")},
            )
            r.raise_for_status()
            ids.append(r.json()["id"])
    return ids


def warm_up(url: str, key: str | None = None, rounds: int = 3) -> dict[str, Any]:
    """A few concurrent searches in each language and mode (so every worker has loaded its tokenizers and
    model) before the measured run; their latencies show what a cold worker costs."""
    from concurrent.futures import ThreadPoolExecutor

    bodies = [
        {"query": q, "search_mode": m}
        for q in ("refund deadline", "返金の申請期限")
        for m in ("hybrid", "vector", "keyword")
    ] * rounds

    def one(body: dict[str, Any]) -> tuple[str, float]:
        started = time.perf_counter()
        r = httpx.post(url + "/api/v1/search", json=body, headers=_headers(key), timeout=120)
        r.raise_for_status()
        return ("ja" if body["query"].startswith("返") else "en"), (time.perf_counter() - started) * 1000

    with ThreadPoolExecutor(4) as pool:
        timings = list(pool.map(one, bodies))
    return {
        "requests": len(timings),
        "max_ms": {lang: round(max(t for la, t in timings if la == lang)) for lang in ("en", "ja")},
    }


def run_locust(
    url: str,
    *,
    users: int,
    duration: int,
    workdir: Path,
    spawn_rate: float | None = None,
    key: str | None = None,
    upload_wait: float = 0.3,
    hostile_dir: Path | None = None,
) -> dict[str, Any]:
    """Run Locust headless against ``url`` in a subprocess; its stats and the uploader's records (with
    ``hostile_dir``: one more user sends the hostile mix; its accepted uploads come back as ``hostile``)."""
    record = workdir / "uploads.jsonl"
    record.unlink(missing_ok=True)
    hostile_record = workdir / "hostile.jsonl"
    hostile_record.unlink(missing_ok=True)
    prefix = workdir / "locust"  # Locust's own CSV files, for a look by hand
    summary = workdir / "summary.json"  # the final figures (the locustfile writes them when the users stop)
    summary.unlink(missing_ok=True)
    env = {
        **os.environ,
        "FINDERLEDGE_LOAD_RECORD": str(record),
        "FINDERLEDGE_LOAD_SUMMARY": str(summary),
        "FINDERLEDGE_LOAD_UPLOAD_WAIT": str(upload_wait),
    }
    if key:
        env["FINDERLEDGE_LOAD_KEY"] = key
    if hostile_dir is not None:
        env["FINDERLEDGE_LOAD_HOSTILE_DIR"] = str(hostile_dir)
        env["FINDERLEDGE_LOAD_HOSTILE_RECORD"] = str(hostile_record)
        users += 1  # the hostile user is one more, beside the same searchers and uploader
    cmd = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        str(LOCUSTFILE),
        "--headless",
        "-u",
        str(users),
        "-r",
        str(spawn_rate or users),
        "-t",
        f"{duration}s",
        "--host",
        url,
        "--csv",
        str(prefix),
        "--only-summary",
        "--stop-timeout",
        "15",
        "--loglevel",
        "WARNING",
    ]
    started = time.monotonic()
    proc = subprocess.run(
        cmd, check=False, env=env, cwd=workdir, capture_output=True, text=True, timeout=duration + 180
    )
    wall = time.monotonic() - started
    if not summary.exists():
        raise RuntimeError(f"locust wrote no summary (exit {proc.returncode}): {proc.stderr[-3000:]}")
    stats = json.loads(summary.read_text(encoding="utf-8"))
    records = (
        [json.loads(line) for line in record.read_text(encoding="utf-8").splitlines()]
        if record.exists()
        else []
    )
    hostile = (
        [json.loads(line) for line in hostile_record.read_text(encoding="utf-8").splitlines()]
        if hostile_record.exists()
        else []
    )
    return {
        "stats": stats,
        "records": records,
        "hostile": hostile,
        "exit_code": proc.returncode,
        "wall_s": round(wall, 1),
        "locust_output_tail": (proc.stdout + proc.stderr)[-4000:],
    }


def after_check(
    url: str, records: list[dict[str, Any]], key: str | None = None, grace_s: float = 5.0
) -> dict[str, Any]:
    """Every recorded upload is listed, and found by its marker word by keyword search (unfiltered: as the
    top hit; filtered to its document id: among the hits).  A miss is retried for up to ``grace_s``
    (another worker may not have caught up yet); what is still missing then is reported."""
    missing: list[str] = []
    not_found: list[dict[str, Any]] = []
    late: list[str] = []
    with httpx.Client(base_url=url, timeout=60, headers=_headers(key)) as client:

        def listed_ids() -> set[str]:
            ids: set[str] = set()
            page = 1
            while True:
                r = client.get("/api/v1/documents", params={"page": page, "per_page": 100})
                r.raise_for_status()
                ids |= {d["id"] for d in r.json()["items"]}
                if page * 100 >= r.json()["total"]:
                    return ids
                page += 1

        def found(rec: dict[str, Any]) -> str | None:
            """None when found both ways, else why not."""
            top = client.post(
                "/api/v1/search", json={"query": rec["marker"], "search_mode": "keyword", "top_k": 3}
            )
            if top.status_code != 200:
                return f"unfiltered search: {top.status_code} {top.text[:200]}"
            hits = top.json()["results"]
            if not hits or hits[0]["document_id"] != rec["id"] or rec["marker"] not in hits[0]["content"]:
                return f"unfiltered: top hit {hits[0]['document_id'] if hits else None}"
            only = client.post(
                "/api/v1/search",
                json={
                    "query": rec["marker"],
                    "search_mode": "keyword",
                    "top_k": 3,
                    "document_ids": [rec["id"]],
                },
            )
            if only.status_code != 200:
                return f"filtered search: {only.status_code} {only.text[:200]}"
            hits = only.json()["results"]
            if not hits or {h["document_id"] for h in hits} != {rec["id"]}:
                return f"filtered: hits {[h['document_id'] for h in hits]}"
            return None

        listed = listed_ids()
        deadline = time.monotonic() + grace_s
        while any(r["id"] not in listed for r in records) and time.monotonic() < deadline:
            time.sleep(0.5)
            listed = listed_ids()
        missing = [r["id"] for r in records if r["id"] not in listed]
        for rec in records:
            why = found(rec)
            if why is not None:
                retry_until = time.monotonic() + grace_s
                while why is not None and time.monotonic() < retry_until:
                    time.sleep(0.5)
                    why = found(rec)
                if why is None:
                    late.append(rec["id"])
                else:
                    not_found.append({**rec, "why": why})
    return {
        "uploads_recorded": len(records),
        "listed": len(records) - len(missing),
        "missing": missing,
        "found_by_marker": len(records) - len(not_found),
        "not_found": not_found,
        "found_only_after_retry": late,
        "ok": not missing and not not_found,
    }


def final_statuses(
    url: str, records: list[dict[str, Any]], key: str | None = None, deadline_s: float = 300.0
) -> dict[str, Any]:
    """Wait (up to ``deadline_s``) until every accepted hostile upload is ``indexed`` or ``failed`` with a
    reason; how many ended which way, how long the last took, and any that did not end."""
    started = time.monotonic()
    final: dict[str, dict[str, Any]] = {}
    with httpx.Client(base_url=url, timeout=60, headers=_headers(key)) as client:
        while len(final) < len(records) and time.monotonic() - started < deadline_s:
            for rec in records:
                if rec["id"] in final:
                    continue
                r = client.get(f"/api/v1/documents/{rec['id']}")
                if r.status_code == 200 and r.json().get("status") in ("indexed", "failed"):
                    final[rec["id"]] = {"status": r.json()["status"], "reason": r.json().get("reason")}
                elif r.status_code not in (200, 404):
                    final[rec["id"]] = {"status": f"HTTP {r.status_code}", "reason": r.text[:200]}
            if len(final) < len(records):
                time.sleep(1.0)
    statuses = [f["status"] for f in final.values()]
    return {
        "accepted": len(records),
        "answered_processing": sum(1 for r in records if r.get("status") == "processing"),
        "indexed": statuses.count("indexed"),
        "failed_with_reason": sum(1 for f in final.values() if f["status"] == "failed" and f["reason"]),
        "failed_without_reason": sum(
            1 for f in final.values() if f["status"] == "failed" and not f["reason"]
        ),
        "other": [f for f in final.values() if f["status"] not in ("indexed", "failed")],
        "not_final": [r["id"] for r in records if r["id"] not in final],
        "settled_after_s": round(time.monotonic() - started, 1),
        "reasons": sorted({str(f["reason"]) for f in final.values() if f["reason"]})[:5],
    }


def _searcher_p99(endpoints: dict[str, Any]) -> float | None:
    """The worst p99 of the search endpoints (what a searcher waits for at worst, but for 1%)."""
    values = [endpoints[name]["p99_ms"] for name in SEARCH_ENDPOINTS if endpoints.get(name, {}).get("p99_ms")]
    return max(values) if values else None


def _server_errors(endpoints: dict[str, Any], kinds: list[dict[str, Any]]) -> dict[str, int]:
    """5xx answers and dropped connections (Locust's status 0) among the failures."""
    fives = sum(k["occurrences"] for k in kinds if str(k["error"]).lstrip().startswith("5"))
    dropped = sum(
        k["occurrences"]
        for k in kinds
        if str(k["error"]).lstrip().startswith("0") or "Connection" in str(k["error"])
    )
    return {"http_5xx": fives, "dropped_connections": dropped}


def _log_errors(log: Path) -> list[str]:
    text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
    return [
        line
        for line in text.splitlines()
        if "Traceback" in line or " 500 " in line or "ERROR" in line or "internal server error" in line
    ][:20]


def measure(
    directory: Path,
    *,
    users: int,
    duration: int,
    workers: int = 2,
    spawn_rate: float | None = None,
    upload_wait: float = 0.3,
    workdir: Path | None = None,
    hostile: bool = False,
) -> dict[str, Any]:
    """Start the server over ``directory`` (new), seed it, run the load, check the uploads: the figures
    (``hostile``: with the hostile mix beside the same load, and the accepted hostile uploads' ends)."""
    workdir = Path(workdir or tempfile.mkdtemp(prefix="finderledge-load-"))
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / "server.log"
    hostile_dir = workdir / "hostile" if hostile else None
    if hostile_dir is not None:
        write_hostile_files(hostile_dir)
    started = time.monotonic()
    with running_server(directory, workers=workers, log=log) as url:
        startup = time.monotonic() - started
        seeded = seed(url)
        warm = warm_up(url)
        run = run_locust(
            url,
            users=users,
            duration=duration,
            workdir=workdir,
            spawn_rate=spawn_rate,
            upload_wait=upload_wait,
            hostile_dir=hostile_dir,
        )
        queued = final_statuses(url, [r for r in run["records"] if r.get("status") == "processing"])
        check = after_check(url, run["records"])
        ends = final_statuses(url, run["hostile"]) if hostile else None
    total = run["stats"]["total"]
    return {
        "server": {
            "workers": workers,
            "startup_s": round(startup, 1),
            "seed_documents": len(seeded),
            "warm_up": warm,
        },
        "load": {
            "users": users,
            "searchers": users - 1,
            "uploaders": 1,
            "hostile_users": int(hostile),
            "duration_s": duration,
            "spawn_rate": spawn_rate or users,
            "upload_wait_s": upload_wait,
            "locust_wall_s": run["wall_s"],
        },
        "requests": total.get("requests", 0),
        "failures": total.get("failures", 0),
        "requests_per_s": total.get("requests_per_s"),
        "p50_ms": total.get("p50_ms"),
        "p99_ms": total.get("p99_ms"),
        "searcher_p99_ms": _searcher_p99(run["stats"]["endpoints"]),
        **_server_errors(run["stats"]["endpoints"], run["stats"]["failure_kinds"]),
        "endpoints": run["stats"]["endpoints"],
        "failure_kinds": run["stats"]["failure_kinds"],
        "after_check": check,
        "uploads_answered_processing": queued,
        "hostile_uploads": ends,
        "server_log_errors": _log_errors(log),
        "locust_exit_code": run["exit_code"],
        "locust_output_tail": run["locust_output_tail"],
    }


def report(result: dict[str, Any]) -> str:
    """The figures as a few lines of text."""
    head = (
        f"load: {result['load']['users']} users ({result['load']['searchers']} searchers + 1 uploader"
        f"{' + 1 hostile' if result['load'].get('hostile_users') else ''}) for "
        f"{result['load']['duration_s']} s on {result['server']['workers']} workers: "
        f"{result['requests']} requests, {result['failures']} failures, "
        f"{result['requests_per_s']:.1f} req/s, p50 {result['p50_ms']:.0f} ms, p99 {result['p99_ms']:.0f} ms; "
        f"searcher p99 {result['searcher_p99_ms']} ms, {result['http_5xx']} 5xx, "
        f"{result['dropped_connections']} dropped connections"
    )
    lines = [head]
    for name, e in sorted(result["endpoints"].items()):
        lines.append(
            f"  {name:24s} {e['requests']:6d} req {e['failures']:3d} fail  {e['requests_per_s']:6.1f}/s  "
            f"p50 {e['p50_ms']:6.0f} ms  p99 {e['p99_ms']:6.0f} ms"
        )
    w = result["server"]["warm_up"]
    lines.append(
        f"  (server start {result['server']['startup_s']} s; warm-up before the run: {w['requests']} "
        f"searches, slowest en {w['max_ms']['en']} ms, ja {w['max_ms']['ja']} ms)"
    )
    c = result["after_check"]
    lines.append(
        f"after-check: {c['uploads_recorded']} uploads recorded, {c['listed']} listed, "
        f"{c['found_by_marker']} found by marker ({len(c['found_only_after_retry'])} only after a retry); "
        f"{'OK' if c['ok'] else 'FAILED'}"
    )
    queued = result.get("uploads_answered_processing") or {}
    if queued.get("accepted"):
        lines.append(
            f"  ({queued['accepted']} of the uploader's files answered 'processing' (a worker busy indexing): "
            f"{queued['indexed']} indexed after, {len(queued['not_final'])} not final)"
        )
    ends = result.get("hostile_uploads")
    if ends:
        lines.append(
            f"hostile uploads accepted: {ends['accepted']} ({ends['answered_processing']} answered processing): "
            f"{ends['indexed']} indexed, {ends['failed_with_reason']} failed with a reason, "
            f"{ends['failed_without_reason']} failed without one, {len(ends['not_final'])} not final after "
            f"{ends['settled_after_s']} s"
        )
    if result["server_log_errors"]:
        lines.append(f"server log errors: {result['server_log_errors'][:5]}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=24, help="concurrent users, one of them the uploader")
    parser.add_argument("--duration", type=int, default=90, help="seconds of load")
    parser.add_argument(
        "--spawn-rate", type=float, default=None, help="users started per second (default: all)"
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--upload-wait", type=float, default=0.3, help="seconds between the uploader's uploads"
    )
    parser.add_argument(
        "--dir", type=Path, default=None, help="index directory (default: a new temporary one)"
    )
    parser.add_argument(
        "--hostile", action="store_true", help="the plain run, then the same load with the hostile mix"
    )
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if args.hostile:
        _main_hostile(args)
        return
    args.out = args.out or HERE / "results" / "server_load.json"
    with tempfile.TemporaryDirectory(prefix="finderledge-load-") as tmp:
        directory = args.dir or Path(tmp) / "index"
        result = measure(
            directory,
            users=args.users,
            duration=args.duration,
            workers=args.workers,
            spawn_rate=args.spawn_rate,
            upload_wait=args.upload_wait,
            workdir=Path(tmp) / "run",
        )
    result["machine"] = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    result.pop("locust_output_tail", None)
    print(report(result))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


def _main_hostile(args: argparse.Namespace) -> None:
    """Plain, then hostile, each on a fresh server and index: both sets of figures in one file."""
    out = args.out or HERE / "results" / "server_load_hostile.json"
    result: dict[str, Any] = {}
    for name, hostile in (("plain", False), ("hostile", True)):
        with tempfile.TemporaryDirectory(prefix="finderledge-load-") as tmp:
            run = measure(
                Path(tmp) / "index",
                users=args.users,
                duration=args.duration,
                workers=args.workers,
                spawn_rate=args.spawn_rate,
                upload_wait=args.upload_wait,
                workdir=Path(tmp) / "run",
                hostile=hostile,
            )
        run.pop("locust_output_tail", None)
        run["load_average_after"] = [round(x, 1) for x in os.getloadavg()]
        print(f"--- {name}\n{report(run)}", flush=True)
        result[name] = run
    result["searcher_p99_ms"] = {name: result[name]["searcher_p99_ms"] for name in ("plain", "hostile")}
    result["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version()}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
