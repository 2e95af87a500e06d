"""The web page in a real browser: headless Chromium, driven by Selenium, against ``finderledge serve``.

A person's path through the page: upload two files (English and Japanese), see them listed, open one, filter
by tag, search in English and in Japanese (the right document first, with why it ranked), ask a question
(an extractive answer, marked as such, with its sources), delete a document and see it gone; and, on a
server with API keys, be told when the key is missing or wrong.  Everything asserted is what the page shows.

Chromium and chromedriver come from the Debian packages ``chromium`` and ``chromium-driver``; they are
installed when missing and we are root, else the tests are skipped.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from server_process import running_server

pytest.importorskip("selenium", reason="selenium is not installed (pip install -e '.[dev]')")

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
from selenium.webdriver.chrome.options import Options as ChromeOptions
from selenium.webdriver.chrome.service import Service as ChromeService
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select, WebDriverWait

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

WAIT = 120.0  # seconds: a shared 2-core machine embeds, indexes and renders slowly

ENGLISH_MD = """# Paid leave

Employees receive twenty days of paid vacation per year. Unused vacation days can be carried over to the
next year, up to a maximum of five days. Vacation requests must be approved by your manager two weeks ahead.

## Sick leave

Sick leave is separate from vacation and needs a doctor's note after three consecutive days.
"""

JAPANESE_TXT = """返金について

返金の申請期限は購入から30日以内です。返金を希望する場合は、注文番号を添えてサポート窓口までご連絡ください。
商品が未開封であることが返金の条件です。送料はお客様のご負担となります。
"""

JAPANESE_NOTE = (
    "［抽出回答：言語モデルが設定されていないため"  # the library's Japanese extractive note begins so
)
ENGLISH_TITLE = "Leave & vacation <policy>"  # markup in a title must show as text, never become markup
JAPANESE_NAME = "返金ポリシー.txt"


# ---------------------------------------------------------------------------------------------- browser


def _browser_binaries() -> tuple[str | None, str | None]:
    return shutil.which("chromium") or shutil.which("chromium-browser"), shutil.which("chromedriver")


@pytest.fixture(scope="module")
def chromium() -> tuple[str, str]:
    """Paths of Chromium and chromedriver, installing the Debian packages when they are missing."""
    browser, driver = _browser_binaries()
    if browser and driver:
        return browser, driver
    if os.name != "posix" or os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.skip(
            "headless Chromium is not installed (Debian: apt-get install chromium chromium-driver) "
            "and this user cannot install it"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update"], ["apt-get", "install", "-y", "chromium", "chromium-driver"]):
        try:
            done = subprocess.run(command, check=False, env=env, capture_output=True, text=True, timeout=1200)
        except (OSError, subprocess.TimeoutExpired) as exc:
            pytest.skip(f"could not install Chromium: {' '.join(command)}: {exc}")
        if done.returncode != 0:
            pytest.skip(f"could not install Chromium: {' '.join(command)} failed: {done.stderr[-600:]}")
    browser, driver = _browser_binaries()
    if not (browser and driver):
        pytest.skip("chromium/chromedriver still missing after apt-get install")
    return browser, driver


@pytest.fixture(scope="module")
def make_driver(
    chromium: tuple[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[[], WebDriver]]:
    """A factory of headless Chromium sessions, each with a fresh profile (its own localStorage)."""
    browser, chromedriver = chromium
    drivers: list[WebDriver] = []
    logs = tmp_path_factory.mktemp("chromedriver")

    def make() -> WebDriver:
        options = ChromeOptions()
        options.binary_location = browser
        for arg in (
            "--headless=new",
            "--no-sandbox",
            "--disable-dev-shm-usage",
            "--disable-gpu",
            "--window-size=1280,1600",
            "--lang=en-US",
            "--no-first-run",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-sync",
            "--disable-default-apps",
            f"--user-data-dir={tmp_path_factory.mktemp('profile')}",
        ):
            options.add_argument(arg)
        service = ChromeService(
            executable_path=chromedriver, log_output=str(logs / f"driver{len(drivers)}.log")
        )
        driver = webdriver.Chrome(service=service, options=options)
        driver.set_page_load_timeout(WAIT)
        driver.set_script_timeout(WAIT)
        drivers.append(driver)
        return driver

    yield make
    for driver in drivers:
        with contextlib.suppress(Exception):  # a dead browser is already gone
            driver.quit()


# ---------------------------------------------------------------------------------------------- server


def _child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FINDERLEDGE_")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    return env


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of ``finderledge serve`` (no API keys) over an empty index directory."""
    root = tmp_path_factory.mktemp("served")
    with running_server(root / "index", log=root / "server.log") as url:
        yield url


# ---------------------------------------------------------------------------------------------- the page


def _visible_errors(driver: WebDriver) -> str:
    try:
        return str(
            driver.execute_script("""
            return ['auth-message', 'upload-error', 'docs-error', 'search-error', 'chat-error']
              .map(id => document.getElementById(id))
              .filter(node => node && !node.hidden && node.textContent)
              .map(node => node.id + ': ' + node.textContent).join(' | ') || 'none';""")
        )
    except Exception as exc:  # noqa: BLE001 - only for a failure message
        return f"(could not read the page: {exc})"


def wait_for(
    driver: WebDriver, condition: Callable[[WebDriver], Any], what: str, timeout: float = WAIT
) -> Any:
    """``condition``'s first truthy value, or a failure naming ``what`` and the errors the page shows."""
    try:
        return WebDriverWait(
            driver, timeout, poll_frequency=0.2, ignored_exceptions=(StaleElementReferenceException,)
        ).until(condition)
    except TimeoutException:
        pytest.fail(
            f"timed out after {timeout:.0f} s waiting for {what}; errors on the page: "
            f"{_visible_errors(driver)}"
        )


def by_id(driver: WebDriver, element_id: str) -> Any:
    return driver.find_element(By.ID, element_id)


def type_into(driver: WebDriver, element_id: str, text: str) -> None:
    field = by_id(driver, element_id)
    field.clear()
    if text:
        field.send_keys(text)


def state_of(driver: WebDriver, element_id: str) -> str | None:
    return driver.execute_script(
        "return document.getElementById(arguments[0]).dataset.state || null;", element_id
    )


def shown_text(driver: WebDriver, element_id: str) -> str:
    """The element's text when it is visible, else ''."""
    return str(
        driver.execute_script(
            "const n = document.getElementById(arguments[0]); return n && !n.hidden ? n.textContent : '';",
            element_id,
        )
    )


ROWS_JS = """
return Array.from(document.querySelectorAll('[data-testid="doc-row"]')).map(row => {
  const cell = name => row.querySelector('[data-testid="' + name + '"]').textContent;
  return {id: row.dataset.documentId, title: cell('doc-title'), filename: cell('doc-filename'),
          tags: Array.from(row.querySelectorAll('[data-testid="doc-tags"] .tag')).map(t => t.textContent),
          parts: cell('doc-parts'), chunks: cell('doc-chunks'), status: cell('doc-status'),
          created: cell('doc-created')};
});"""

RESULTS_JS = """
return Array.from(document.querySelectorAll('#search-results [data-testid="search-result"]')).map(li => {
  const part = name => { const n = li.querySelector('[data-testid="' + name + '"]'); return n ? n.textContent : null; };
  return {document_id: li.dataset.documentId, rank: part('result-rank'), title: part('result-title'),
          score: part('result-score'), vector: part('result-vector'), keyword: part('result-keyword'),
          snippet: part('result-snippet')};
});"""


def rows(driver: WebDriver) -> list[dict[str, Any]]:
    return list(driver.execute_script(ROWS_JS))


def wait_docs_loaded(driver: WebDriver) -> list[dict[str, Any]]:
    wait_for(driver, lambda d: state_of(d, "docs-body") in ("done", "error"), "the documents list")
    assert state_of(driver, "docs-body") == "done", _visible_errors(driver)
    return rows(driver)


def upload(driver: WebDriver, path: Path, *, title: str = "", tags: str = "") -> str:
    """Upload ``path`` through the form; the page's state afterwards ('done' or 'error')."""
    by_id(driver, "upload-file").send_keys(str(path))
    type_into(driver, "upload-title", title)
    type_into(driver, "upload-tags", tags)
    by_id(driver, "upload-submit").click()
    wait_for(
        driver,
        lambda d: state_of(d, "upload-form") in ("done", "error") and by_id(d, "upload-submit").is_enabled(),
        f"the upload of {path.name}",
        timeout=2 * WAIT,
    )
    return str(state_of(driver, "upload-form"))


def search(driver: WebDriver, query: str, *, mode: str = "") -> list[dict[str, Any]]:
    """Search from the page; mode "" leaves mode and top k to the index's own settings (the page's default)."""
    type_into(driver, "search-query", query)
    Select(by_id(driver, "search-mode")).select_by_value(mode)
    by_id(driver, "search-submit").click()
    wait_for(
        driver,
        lambda d: (
            state_of(d, "search-results") in ("done", "error")
            and d.execute_script("return document.getElementById('search-results').dataset.query") == query
            or state_of(d, "search-results") == "error"
        ),
        f"the results for {query!r}",
    )
    assert state_of(driver, "search-results") == "done", _visible_errors(driver)
    return list(driver.execute_script(RESULTS_JS))


def ask(driver: WebDriver, question: str) -> dict[str, Any]:
    turns_before = len(driver.find_elements(By.CSS_SELECTOR, '[data-testid="chat-turn"]'))
    type_into(driver, "chat-question", question)
    by_id(driver, "chat-submit").click()
    wait_for(
        driver,
        lambda d: (
            len(d.find_elements(By.CSS_SELECTOR, '[data-testid="chat-turn"]')) > turns_before
            and d.execute_script("""
                 const turns = document.querySelectorAll('[data-testid="chat-turn"]');
                 return turns[turns.length - 1].dataset.state !== 'streaming';""")
            or bool(shown_text(d, "chat-error"))
        ),
        f"the answer to {question!r}",
        timeout=2 * WAIT,
    )
    assert not shown_text(driver, "chat-error"), shown_text(driver, "chat-error")
    return dict(
        driver.execute_script("""
        const turns = document.querySelectorAll('[data-testid="chat-turn"]');
        const turn = turns[turns.length - 1];
        const badge = turn.querySelector('[data-testid="chat-extractive"]');
        return {state: turn.dataset.state, extractive: turn.dataset.extractive || null,
                question: turn.querySelector('[data-testid="chat-turn-question"]').textContent,
                answer: turn.querySelector('[data-testid="chat-answer"]').textContent,
                badge: badge.hidden ? '' : badge.textContent,
                sources: Array.from(turn.querySelectorAll('[data-testid="chat-source"]')).map(li => ({
                    document_id: li.dataset.documentId,
                    title: li.querySelector('[data-testid="source-title"]').textContent}))};""")
    )


def open_page(driver: WebDriver, url: str) -> None:
    driver.get(url + "/")
    wait_for(
        driver,
        lambda d: d.execute_script("return document.body.dataset.ready === 'true'"),
        "the page to start",
    )


def full_screenshot(driver: WebDriver, path: Path) -> None:
    height = int(driver.execute_script("return document.documentElement.scrollHeight"))
    driver.set_window_size(1280, min(max(height + 120, 900), 8000))
    driver.save_screenshot(str(path))
    print(f"screenshot: {path}")


# ---------------------------------------------------------------------------------------------- tests


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    folder = tmp_path / "to-upload"
    folder.mkdir()
    english = folder / "vacation_policy.md"
    english.write_text(ENGLISH_MD, encoding="utf-8")
    japanese = folder / JAPANESE_NAME
    japanese.write_text(JAPANESE_TXT, encoding="utf-8")
    image = folder / "photo.png"
    image.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)
    return {"english": english, "japanese": japanese, "image": image}


def test_upload_list_search_chat_delete(
    server: str, make_driver: Callable[[], WebDriver], files: dict[str, Path], tmp_path: Path
) -> None:
    from finderledge.cli.commands import package_version

    driver = make_driver()
    open_page(driver, server)
    assert driver.title == "FinderLedge"
    assert wait_docs_loaded(driver) == []
    assert shown_text(driver, "docs-empty") == "No documents."
    wait_for(driver, lambda d: package_version() in by_id(d, "version").text, "the version in the footer")
    assert by_id(driver, "version").text == f"FinderLedge {package_version()} · API v1"
    wait_for(driver, lambda d: by_id(d, "health").text == "status: ok", "the health in the footer")
    assert not shown_text(driver, "auth-message")  # no keys on this server: nothing to complain about

    # Upload: two files through the file input; each is shown as created, then listed.
    assert upload(driver, files["english"], title=ENGLISH_TITLE, tags="hr, policy") == "done", (
        _visible_errors(driver)
    )
    created = by_id(driver, "upload-result")
    english_id = created.get_attribute("data-document-id")
    assert english_id and created.is_displayed()
    assert f"Indexed “{ENGLISH_TITLE}”." in created.text
    assert "vacation_policy.md" in created.text and "hr, policy" in created.text

    assert upload(driver, files["japanese"], tags="support") == "done", _visible_errors(driver)
    japanese_id = by_id(driver, "upload-result").get_attribute("data-document-id")
    assert japanese_id and japanese_id != english_id
    assert JAPANESE_NAME in by_id(driver, "upload-result").text

    listed = rows(driver)
    assert [r["id"] for r in listed] == [english_id, japanese_id]  # upload order
    english_row, japanese_row = listed
    assert english_row["title"] == ENGLISH_TITLE  # the markup came through as text
    assert english_row["filename"] == "vacation_policy.md"
    assert english_row["tags"] == ["hr", "policy"]
    assert english_row["parts"] == "1" and int(english_row["chunks"]) >= 1 and english_row["created"]
    assert japanese_row["title"] == JAPANESE_NAME and japanese_row["filename"] == JAPANESE_NAME
    assert japanese_row["tags"] == ["support"]
    assert "2 documents" in by_id(driver, "docs-page-info").text
    assert driver.find_elements(By.CSS_SELECTOR, "#docs-body b, #upload-result b") == []

    # A file the server does not read: its error is shown, and the list is unchanged.
    assert upload(driver, files["image"]) == "error"
    error = shown_text(driver, "upload-error")
    assert error.startswith("Upload of photo.png failed (HTTP 4"), error
    assert len(error) > len("Upload of photo.png failed (HTTP 400): ") + 5, error  # the server's detail
    assert not by_id(driver, "upload-result").is_displayed()
    assert len(rows(driver)) == 2

    # A row opens its detail, with the chunks' text.
    driver.find_element(
        By.CSS_SELECTOR, f'tr[data-document-id="{japanese_id}"] [data-testid="doc-title"]'
    ).click()
    wait_for(
        driver,
        lambda d: d.execute_script(
            """
        const panel = document.getElementById('doc-detail');
        return !panel.hidden && panel.dataset.documentId === arguments[0]
          && panel.querySelectorAll('[data-testid="doc-chunk"]').length > 0;""",
            japanese_id,
        ),
        "the document's detail",
    )
    assert by_id(driver, "doc-detail-title").text == JAPANESE_NAME
    assert "返金の申請期限は購入から30日以内です。" in by_id(driver, "doc-detail-chunks").text
    by_id(driver, "doc-detail-close").click()
    assert not by_id(driver, "doc-detail").is_displayed()

    # The tag filter lists only the tagged document.
    type_into(driver, "docs-tag-filter", "hr")
    by_id(driver, "docs-refresh").click()
    wait_for(driver, lambda d: [r["id"] for r in rows(d)] == [english_id], "the list filtered by tag 'hr'")
    assert "1 document" in by_id(driver, "docs-page-info").text
    type_into(driver, "docs-tag-filter", "")
    by_id(driver, "docs-refresh").click()
    wait_for(driver, lambda d: len(rows(d)) == 2, "the unfiltered list")

    # Paging: one document per page, in upload order.
    type_into(driver, "docs-per-page", "1")
    by_id(driver, "docs-refresh").click()
    wait_for(driver, lambda d: [r["id"] for r in rows(d)] == [english_id], "page 1 of the list, one per page")
    assert by_id(driver, "docs-page-info").text == "Page 1 of 2 · 2 documents"
    assert not by_id(driver, "docs-prev").is_enabled() and by_id(driver, "docs-next").is_enabled()
    by_id(driver, "docs-next").click()
    wait_for(driver, lambda d: [r["id"] for r in rows(d)] == [japanese_id], "page 2 of the list")
    assert by_id(driver, "docs-page-info").text == "Page 2 of 2 · 2 documents"
    assert by_id(driver, "docs-prev").is_enabled() and not by_id(driver, "docs-next").is_enabled()
    type_into(driver, "docs-per-page", "20")
    by_id(driver, "docs-refresh").click()
    wait_for(driver, lambda d: len(rows(d)) == 2, "the whole list on one page")

    # Search in English: the vacation policy first, found by both legs.
    results = search(driver, "how many paid vacation days do employees get")
    assert results, "no results shown"
    assert by_id(driver, "search-status").text.endswith("(index default)")  # the page sent no mode, no top k
    top = results[0]
    assert top["document_id"] == english_id, results
    assert top["rank"] == "#1" and ENGLISH_TITLE in top["title"] and "vacation_policy.md" in top["title"]
    assert re.fullmatch(r"score \d+\.\d{4}", top["score"]), top["score"]
    assert re.fullmatch(r"keyword: #1 \(\d+\.\d{4}\)", top["keyword"]), top["keyword"]
    assert re.fullmatch(r"vector: #\d+ \(-?\d+\.\d{4}\)", top["vector"]), top["vector"]
    assert "twenty days of paid vacation" in top["snippet"]

    # Search in Japanese: the refund policy first, with its keyword rank and score.
    results = search(driver, "返金の申請期限")
    assert results and results[0]["document_id"] == japanese_id, results
    top = results[0]
    assert JAPANESE_NAME in top["title"]
    assert re.fullmatch(r"keyword: #1 \(\d+\.\d{4}\)", top["keyword"]), top["keyword"]
    assert "返金の申請期限は購入から30日以内です。" in top["snippet"]
    # The English document shares no Japanese word: where listed, its keyword leg shows "—".
    assert all(r["keyword"] == "keyword: —" for r in results if r["document_id"] == english_id), results

    # Keyword-only search: every result was found by the keyword leg alone.
    results = search(driver, "返金の申請期限", mode="keyword")
    assert results and results[0]["document_id"] == japanese_id
    assert all(r["vector"] == "vector: —" and r["keyword"] != "keyword: —" for r in results), results

    # Chat (no language model configured): an extractive answer, marked so, citing the refund policy.
    turn = ask(driver, "返金の申請期限はいつまでですか？")
    assert turn["state"] == "done" and turn["question"] == "返金の申請期限はいつまでですか？"
    assert "30日以内" in turn["answer"], turn
    assert turn["answer"].startswith(JAPANESE_NOTE), turn  # the note in the question's language (issue 44)
    assert turn["extractive"] == "true" and turn["badge"].startswith("Extractive"), turn
    assert turn["sources"] and turn["sources"][0]["document_id"] == japanese_id, turn
    assert JAPANESE_NAME in turn["sources"][0]["title"]
    assert by_id(driver, "chat-question").get_attribute("value") == ""  # ready for the next question

    full_screenshot(driver, tmp_path / "page.png")
    driver.set_window_size(1280, 1600)

    # Delete the English document: confirmed, then gone from the list and from search.
    driver.find_element(
        By.CSS_SELECTOR, f'tr[data-document-id="{english_id}"] [data-testid="doc-delete"]'
    ).click()
    alert = WebDriverWait(driver, WAIT).until(EC.alert_is_present())
    assert ENGLISH_TITLE in alert.text
    alert.accept()
    wait_for(
        driver,
        lambda d: [r["id"] for r in rows(d)] == [japanese_id],
        "the deleted document to leave the list",
    )
    assert "1 document" in by_id(driver, "docs-page-info").text
    results = search(driver, "paid vacation days per year")
    assert all(r["document_id"] != english_id for r in results), results

    # A reload lists what the server has (nothing was kept only in the page).
    open_page(driver, server)
    assert [r["id"] for r in wait_docs_loaded(driver)] == [japanese_id]

    # No script error on the way (refused requests, like the .png upload's 400, are logged by the browser too).
    script_errors = [
        entry["message"]
        for entry in driver.get_log("browser")
        if entry["level"] == "SEVERE" and "Failed to load resource" not in entry["message"]
    ]
    assert script_errors == []


def _create_key(directory: Path, tenant: str) -> str:
    """A new key for ``tenant``, made as an operator would: ``finderledge keys create``."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "finderledge",
            "keys",
            "create",
            "--tenant",
            tenant,
            "--dir",
            str(directory),
            "--json",
        ],
        check=False,
        capture_output=True,
        text=True,
        env=_child_env(),
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["key"])


def test_api_key_missing_wrong_and_right(
    make_driver: Callable[[], WebDriver], tmp_path: Path, files: dict[str, Path]
) -> None:
    directory = tmp_path / "keyed"
    key = _create_key(directory, "alice")
    with running_server(directory, log=tmp_path / "keyed-server.log") as url:
        driver = make_driver()
        open_page(driver, url)

        # No key: the list cannot load, and the page says a key is needed.
        wait_for(driver, lambda d: state_of(d, "docs-body") == "error", "the refused list")
        message = shown_text(driver, "auth-message")
        assert message.startswith("This server needs an API key (HTTP 401"), message
        assert "Could not list documents (HTTP 401)" in shown_text(driver, "docs-error")
        assert by_id(driver, "version").text.startswith("FinderLedge ")  # /version is public

        # A wrong key: rejected, said so.
        type_into(driver, "api-key", "flk_not-a-real-key")
        by_id(driver, "api-key-save").click()
        wait_for(
            driver,
            lambda d: shown_text(d, "auth-message").startswith("The server rejected the API key"),
            "the wrong key's message",
        )
        assert state_of(driver, "docs-body") == "error"
        assert rows(driver) == []

        # The right key: no message, the (empty) list loads, an upload works.
        type_into(driver, "api-key", key)
        by_id(driver, "api-key-save").click()
        wait_for(driver, lambda d: state_of(d, "docs-body") == "done", "the list with the right key")
        assert not shown_text(driver, "auth-message")
        assert not shown_text(driver, "docs-error")
        assert shown_text(driver, "docs-empty") == "No documents."
        assert upload(driver, files["english"], tags="hr") == "done", _visible_errors(driver)
        assert [r["filename"] for r in rows(driver)] == ["vacation_policy.md"]

        # The key is remembered by this browser across a reload.
        open_page(driver, url)
        assert by_id(driver, "api-key").get_attribute("value") == key
        assert [r["filename"] for r in wait_docs_loaded(driver)] == ["vacation_policy.md"]
        assert not shown_text(driver, "auth-message")

        # Forgetting it: refused again.
        by_id(driver, "api-key-forget").click()
        wait_for(driver, lambda d: state_of(d, "docs-body") == "error", "the list without a key")
        assert shown_text(driver, "auth-message").startswith("This server needs an API key")
        assert driver.execute_script("return localStorage.length") == 0


def test_a_background_upload_shows_processing_then_indexed_or_failed(
    make_driver: Callable[[], WebDriver], tmp_path: Path, files: dict[str, Path]
) -> None:
    """With ``--index-wait 0.01`` every upload answers 201 ``processing`` (issue 28: large files are indexed in the
    background): the page polls the document until it is indexed, or shows why it failed."""
    with running_server(tmp_path / "index", args=["--index-wait", "0.01"], log=tmp_path / "bg.log") as url:
        driver = make_driver()
        open_page(driver, url)
        assert wait_docs_loaded(driver) == []
        assert upload(driver, files["english"], title=ENGLISH_TITLE, tags="hr") == "done", _visible_errors(
            driver
        )
        assert f"Indexed “{ENGLISH_TITLE}”." in by_id(driver, "upload-result").text
        listed = wait_docs_loaded(driver)
        assert [(r["filename"], r["status"]) for r in listed] == [("vacation_policy.md", "indexed")]
        assert int(listed[0]["chunks"]) >= 1

        broken = tmp_path / "broken.pdf"
        broken.write_bytes(b"%PDF-1.4\n" + b"not really a PDF " * 200)  # accepted, then unreadable in the job
        assert upload(driver, broken) == "error"
        error = shown_text(driver, "upload-error")
        # 422 when the job failed in the background (polled), 400 when it failed within the short wait
        assert error.startswith(
            ("Upload of broken.pdf failed (HTTP 422): ", "Upload of broken.pdf failed (HTTP 400): ")
        )
        assert "could not be read" in error, error  # the job's reason, shown
        # a failure within the wait (400) keeps nothing; one in the background (422) stays listed as failed,
        # with its reason, until deleted (which of the two happens depends on the machine's speed)
        listed = [(r["filename"], r["status"]) for r in wait_docs_loaded(driver)]
        assert listed in (
            [("vacation_policy.md", "indexed")],
            [("vacation_policy.md", "indexed"), ("broken.pdf", "failed")],
        ), listed
        assert ("broken.pdf", "failed") in listed or "(HTTP 400)" in error, (listed, error)


def test_an_index_built_by_the_cli_shows_as_it_is(
    make_driver: Callable[[], WebDriver], tmp_path: Path, files: dict[str, Path]
) -> None:
    """Issue 44: over an index ``finderledge add`` built, the page lists every document with its file's name
    (not "(untitled)", not only the uploads); a file uploaded that the CLI had already added is one search
    result and one source, saying where else it is; a Japanese question's answer note is Japanese."""
    directory = tmp_path / "cli-index"
    folder = files["english"].parent
    files["image"].unlink()  # the CLI would skip it; only the two texts are added
    done = subprocess.run(
        [sys.executable, "-m", "finderledge", "add", str(folder), "--dir", str(directory)],
        check=False,
        capture_output=True,
        text=True,
        env=_child_env(),
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    with running_server(directory, log=tmp_path / "cli-server.log") as url:
        driver = make_driver()
        open_page(driver, url)
        listed = wait_docs_loaded(driver)
        assert sorted(r["title"] for r in listed) == sorted([JAPANESE_NAME, "vacation_policy.md"]), listed
        assert "2 documents" in by_id(driver, "docs-page-info").text
        added_id = next(r["id"] for r in listed if r["title"] == "vacation_policy.md")

        # the row opens the document the CLI added
        driver.find_element(
            By.CSS_SELECTOR, f'tr[data-document-id="{added_id}"] [data-testid="doc-title"]'
        ).click()
        wait_for(
            driver,
            lambda d: d.execute_script(
                "const p = document.getElementById('doc-detail'); return !p.hidden && "
                "p.querySelectorAll('[data-testid=\"doc-chunk\"]').length > 0;"
            ),
            "the CLI document's detail",
        )
        assert by_id(driver, "doc-detail-title").text == "vacation_policy.md"
        by_id(driver, "doc-detail-close").click()

        # the same file, uploaded: listed as a third document, yet one passage in search and chat
        assert upload(driver, files["english"]) == "done", _visible_errors(driver)
        uploaded_id = by_id(driver, "upload-result").get_attribute("data-document-id")
        wait_for(driver, lambda d: len(rows(d)) == 3, "the uploaded copy in the list")
        results = search(driver, "how many paid vacation days do employees get")
        texts = [r["snippet"] for r in results]
        assert len(texts) == len(set(texts)), results
        top = results[0]
        assert top["document_id"] in (added_id, uploaded_id) and "vacation_policy.md" in top["title"], results
        also = driver.execute_script(
            "const n = document.querySelector('#search-results [data-testid=\"result-also\"]');"
            "return n ? n.textContent : '';"
        )
        assert also == "Also in: vacation_policy.md", also
        assert all(r["title"] != "(untitled)" for r in results), results

        turn = ask(driver, "有給休暇は何日ですか？ paid vacation days")
        assert turn["answer"].startswith(JAPANESE_NOTE), turn
        assert turn["answer"].count("twenty days of paid vacation") == 1, turn["answer"]
        ids = [s["document_id"] for s in turn["sources"]]
        assert len(ids) == len(set(ids)), turn
