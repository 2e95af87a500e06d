"""Locust users for the load test of ``finderledge serve`` (run by benchmarks/bench_server_load.py and
tests/e2e/test_server_load.py in a subprocess; never imported by them: Locust monkey-patches with gevent).

* :class:`Searcher` (all users but one): searches in English and Japanese, in every mode, some narrowed by
  tags, document ids, a filter or a score threshold, some as chat (plain and streamed), some listing.
* :class:`Uploader` (exactly one): uploads small distinct text/Markdown files for the whole run, each with a
  unique marker word, and appends ``{"id", "marker", "filename"}`` per created document to the JSON-lines
  file ``$FINDERLEDGE_LOAD_RECORD`` (the after-check reads it).

Every response is checked (status, then the body's shape), so a wrong answer counts as a failure too.

    locust -f benchmarks/locustfile.py --headless -u 8 -r 8 -t 30s --host http://127.0.0.1:8000 --only-summary

``$FINDERLEDGE_LOAD_SUMMARY``: where to write the final figures as JSON (per endpoint: requests, failures,
p50/p90/p99/max ms, requests/s; the failures by kind), taken when the users have stopped, so the last
requests count (Locust's CSV files are written on a timer); ``$FINDERLEDGE_LOAD_KEY``: an API key to send (when the server has keys); ``$FINDERLEDGE_LOAD_UPLOAD_WAIT``:
seconds the uploader waits between uploads (default 0.3).

``$FINDERLEDGE_LOAD_HOSTILE_DIR`` (the hostile mix, issue 28): a folder holding ``bomb.docx`` (a zip bomb),
``rows.csv`` (200,000 rows), ``report.pdf`` (100 pages) and ``filter.json`` (a search body with a 50,000-value
filter), written by bench_server_load.py.  One more user, :class:`Hostile`, then sends them in turn for the
whole run, expecting 413, 413, 201 and 400; each accepted PDF's id goes to ``$FINDERLEDGE_LOAD_HOSTILE_RECORD``
(the after-check waits for each to end ``indexed`` or ``failed`` with a reason).
"""

from __future__ import annotations

import itertools
import json
import os
import random
import string
import threading

from locust import HttpUser, between, constant, events, task

KEY = os.environ.get("FINDERLEDGE_LOAD_KEY")
RECORD = os.environ.get("FINDERLEDGE_LOAD_RECORD", "load-uploads.jsonl")
SUMMARY = os.environ.get("FINDERLEDGE_LOAD_SUMMARY")
UPLOAD_WAIT = float(os.environ.get("FINDERLEDGE_LOAD_UPLOAD_WAIT", "0.3"))
HOSTILE_DIR = os.environ.get("FINDERLEDGE_LOAD_HOSTILE_DIR")
HOSTILE_RECORD = os.environ.get("FINDERLEDGE_LOAD_HOSTILE_RECORD", "load-hostile.jsonl")
HOSTILE_WAIT = float(os.environ.get("FINDERLEDGE_LOAD_HOSTILE_WAIT", "1.0"))
HEADERS = {"Authorization": f"Bearer {KEY}"} if KEY else {}

EN = [
    "refund",
    "How long do I have to request a refund?",
    "password reset link expired",
    "invoice billing address change",
    "getting started with the installer",
    "service level agreement uptime",
    "data center location",
    "which card is refunded",
    "shipping schedule",
    "two-factor authentication",
]
JA = [
    "返金の申請期限",
    "パスワードの再設定",
    "データセンターの所在地",
    "稼働率の保証",
    "請求書の送付先を変更したい",
    "サービスレベル契約",
    "障害時の連絡先",
]
TAGS = [["billing"], ["guide"], ["ja"], ["billing", "ja"], ["nonexistent-tag"]]
MODES = ["hybrid", "hybrid", "hybrid", "vector", "keyword"]


def _query() -> str:
    return random.choice(EN if random.random() < 0.6 else JA)


class Searcher(HttpUser):
    """Reads only: search, chat, list."""

    weight = 1
    wait_time = between(0.05, 0.25)

    def _search(self, body: dict, name: str) -> None:
        with self.client.post(
            "/api/v1/search", json=body, headers=HEADERS, name=name, catch_response=True
        ) as r:
            if r.status_code != 200:
                r.failure(f"{r.status_code}: {r.text[:200]}")
                return
            data = r.json()
            if not isinstance(data.get("results"), list) or not isinstance(data.get("context"), str):
                r.failure(f"bad body: {r.text[:200]}")
            elif body.get("document_ids") and any(
                h["document_id"] not in body["document_ids"] for h in data["results"]
            ):
                r.failure("a hit outside the requested document ids")
            else:
                r.success()

    @task(6)
    def search_english(self) -> None:
        self._search(
            {"query": random.choice(EN), "top_k": random.randint(3, 10), "search_mode": random.choice(MODES)},
            "search en",
        )

    @task(4)
    def search_japanese(self) -> None:
        self._search(
            {"query": random.choice(JA), "top_k": random.randint(3, 10), "search_mode": random.choice(MODES)},
            "search ja",
        )

    @task(3)
    def search_filtered(self) -> None:
        body: dict = {"query": _query(), "top_k": 5}
        kind = random.randrange(4)
        if kind == 0:
            body["tags"] = random.choice(TAGS)
        elif kind == 1:
            body["filter"] = {"$or": [{"filename": {"$eq": "billing-faq.md"}}, {"tags": {"$contains": "ja"}}]}
        elif kind == 2:
            body["score_threshold"] = random.choice([0.1, 0.3, 0.6])
        else:
            body["filter"] = {"size": {"$gte": 100}}
            body["search_mode"] = random.choice(MODES)
        self._search(body, "search filtered")

    @task(2)
    def chat(self) -> None:
        body = {"question": _query(), "top_k": 3}
        with self.client.post(
            "/api/v1/chat", json=body, headers=HEADERS, name="chat", catch_response=True
        ) as r:
            if r.status_code != 200:
                r.failure(f"{r.status_code}: {r.text[:200]}")
            elif not isinstance(r.json().get("answer"), str) or not isinstance(r.json().get("sources"), list):
                r.failure(f"bad body: {r.text[:200]}")
            else:
                r.success()

    @task(1)
    def chat_stream(self) -> None:
        body = {
            "question": _query(),
            "top_k": 3,
            "history": [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}],
        }
        with self.client.post(
            "/api/v1/chat/stream", json=body, headers=HEADERS, name="chat stream", catch_response=True
        ) as r:
            if r.status_code != 200:
                r.failure(f"{r.status_code}: {r.text[:200]}")
                return
            events = [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: ")]
            if not events or events[-1].get("done") is not True or "error" in events[-1]:
                r.failure(f"stream did not end with done: {r.text[-200:]}")
            else:
                r.success()

    @task(1)
    def list_documents(self) -> None:
        params = {"page": random.randint(1, 3), "per_page": random.choice([5, 20, 50])}
        with self.client.get(
            "/api/v1/documents", params=params, headers=HEADERS, name="list", catch_response=True
        ) as r:
            if r.status_code != 200:
                r.failure(f"{r.status_code}: {r.text[:200]}")
            elif not isinstance(r.json().get("items"), list) or r.json().get("total", 0) < 1:
                r.failure(f"bad body: {r.text[:200]}")
            else:
                r.success()


_counter = itertools.count(1)
_record_lock = threading.Lock()


def _marker() -> str:
    """A word no document holds: letters only, so every tokenizer keeps it whole."""
    return "zq" + "".join(random.choices(string.ascii_lowercase, k=12))


class Uploader(HttpUser):
    """Exactly one: uploads small distinct files for the whole run and records what it created."""

    fixed_count = 1
    wait_time = constant(UPLOAD_WAIT)

    @task
    def upload(self) -> None:
        n = next(_counter)
        marker = _marker()
        if n % 2:
            name, mime = f"load-note-{n:05d}.md", "text/markdown"
            text = (
                f"# Load note {n}\n\nThis note carries the marker word {marker}. It describes shipping "
                f"schedule number {n} for the warehouse.\n\n配送の予定について説明します。\n"
            )
        else:
            name, mime = f"load-note-{n:05d}.txt", "text/plain"
            text = f"Plain note {n}: marker {marker}; refunds for order {n} go to the original card.\n"
        tags = "load," + ("even" if n % 2 == 0 else "odd")
        with self.client.post(
            "/api/v1/documents",
            files={"file": (name, text.encode("utf-8"), mime)},
            data={"tags": tags, "title": f"Load note {n}"},
            headers=HEADERS,
            name="upload",
            catch_response=True,
        ) as r:
            if r.status_code != 201:
                r.failure(f"{r.status_code}: {r.text[:200]}")
                return
            doc = r.json()
            indexed = doc.get("status") == "indexed" and doc.get("chunk_count", 0) >= 1
            queued = (
                doc.get("status") == "processing"
            )  # its worker is busy (a large upload): the contract's 201
            if doc.get("filename") != name or not (indexed or queued):
                r.failure(f"bad body: {r.text[:200]}")
                return
            r.success()
        with _record_lock, open(RECORD, "a", encoding="utf-8") as fh:
            record = {"id": doc["id"], "marker": marker, "filename": name, "status": doc["status"]}
            fh.write(json.dumps(record) + "\n")


if HOSTILE_DIR:  # defined only for the hostile mix: Locust runs every user class the module holds

    class Hostile(HttpUser):
        """Exactly one: the hostile uploads and the oversized filter, in turn, for the whole run."""

        fixed_count = 1
        wait_time = constant(HOSTILE_WAIT)

        def on_start(self) -> None:
            folder = os.path.abspath(HOSTILE_DIR)
            self.files = {
                name: open(os.path.join(folder, name), "rb").read()  # noqa: SIM115 - read once, small
                for name in ("bomb.docx", "rows.csv", "report.pdf", "filter.json")
            }
            self.turn = itertools.cycle(["bomb.docx", "filter.json", "rows.csv", "report.pdf"])

        @task
        def hostile(self) -> None:
            name = next(self.turn)
            if name == "filter.json":
                headers = {**HEADERS, "Content-Type": "application/json"}
                with self.client.post(
                    "/api/v1/search",
                    data=self.files[name],
                    headers=headers,
                    name="hostile filter 50,000 values",
                    catch_response=True,
                ) as r:
                    if r.status_code == 400 and "limit" in r.text:
                        r.success()
                    else:
                        r.failure(f"{r.status_code}: {r.text[:200]}")
                return
            expected = 201 if name == "report.pdf" else 413
            label = {
                "bomb.docx": "zip-bomb docx",
                "rows.csv": "csv 200,000 rows",
                "report.pdf": "pdf 100 pages",
            }
            with self.client.post(
                "/api/v1/documents",
                files={"file": (name, self.files[name], "application/octet-stream")},
                headers=HEADERS,
                name=f"hostile {label[name]}",
                catch_response=True,
            ) as r:
                if r.status_code != expected:
                    r.failure(f"{r.status_code}: {r.text[:200]}")
                    return
                r.success()
                if expected == 201:
                    doc = r.json()
                    with _record_lock, open(HOSTILE_RECORD, "a", encoding="utf-8") as fh:
                        fh.write(json.dumps({"id": doc["id"], "status": doc.get("status")}) + "\n")


def _entry(e) -> dict:
    return {
        "requests": e.num_requests,
        "failures": e.num_failures,
        **{
            f"p{int(q * 100)}_ms": e.get_response_time_percentile(q) if e.num_requests else None
            for q in (0.5, 0.9, 0.99)
        },
        "max_ms": e.max_response_time if e.num_requests else None,
        "mean_ms": e.avg_response_time if e.num_requests else None,
        "requests_per_s": e.total_rps,
    }


@events.quitting.add_listener
def _write_summary(environment, **_kwargs) -> None:
    """The final figures, for bench_server_load.py (the users have stopped by now)."""
    if not SUMMARY:
        return
    stats = environment.stats
    summary = {
        "endpoints": {f"{e.method} {e.name}": _entry(e) for e in stats.entries.values()},
        "total": _entry(stats.total),
        "failure_kinds": [
            {"endpoint": f"{e.method} {e.name}", "error": str(e.error)[:500], "occurrences": e.occurrences}
            for e in stats.errors.values()
        ],
    }
    with open(SUMMARY, "w", encoding="utf-8") as fh:
        json.dump(summary, fh, indent=1)
