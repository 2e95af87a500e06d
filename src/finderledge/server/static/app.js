// FinderLedge web page: plain DOM, no framework, no build step.
// Every string that comes from the server is put on the page with textContent (never innerHTML).
"use strict";

(function () {
  const API = "/api/v1";
  const KEY_STORAGE = "finderledge.apiKey";
  const SNIPPET_CHARS = 400;
  const MAX_HISTORY_TURNS = 40; // the API accepts 50 turns

  const $ = (id) => document.getElementById(id);

  // ---------------------------------------------------------------- helpers

  /** Build an element: el("td", {className: "num"}, "text", childNode, ...). */
  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    if (props) {
      for (const [name, value] of Object.entries(props)) {
        if (value === undefined || value === null) continue;
        if (name === "dataset") Object.assign(node.dataset, value);
        else if (name === "testid") node.setAttribute("data-testid", value);
        else if (name in node) node[name] = value;
        else node.setAttribute(name, value);
      }
    }
    for (const child of children) {
      if (child === undefined || child === null || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function show(node, text) {
    node.textContent = text;
    node.hidden = !text;
  }

  function splitList(text) {
    const items = String(text || "").split(",").map((s) => s.trim()).filter(Boolean);
    return items.length ? items : null;
  }

  function fmtScore(value) {
    return typeof value === "number" && isFinite(value) ? value.toFixed(4) : "—";
  }

  function fmtDate(value) {
    if (!value) return "";
    const date = new Date(value);
    return isNaN(date.getTime()) ? String(value) : date.toLocaleString();
  }

  function fmtSize(bytes) {
    if (typeof bytes !== "number") return "";
    if (bytes < 1024) return bytes + " B";
    if (bytes < 1024 * 1024) return (bytes / 1024).toFixed(1) + " KiB";
    return (bytes / 1024 / 1024).toFixed(1) + " MiB";
  }

  function snippet(text, limit) {
    const flat = String(text || "").replace(/\s+/g, " ").trim();
    return flat.length > limit ? flat.slice(0, limit) + "…" : flat;
  }

  /** "title — filename" for a hit or source, whichever parts exist. */
  function docLabel(item) {
    const title = item.title || "";
    const filename = item.filename || "";
    if (title && filename && title !== filename) return title + " — " + filename;
    return title || filename || item.document_id || "(untitled)";
  }

  /** "Also in: …" for a passage found in other documents too (identical text, shown once), else null. */
  function alsoIn(item, testid) {
    const others = item.also_in || [];
    if (!others.length) return null;
    return el("p", { className: "muted also", testid },
      "Also in: " + others.map(docLabel).join(", "));
  }

  /** A FastAPI error body's detail as one line: a string, or a list of validation errors. */
  function formatDetail(detail) {
    if (typeof detail === "string") return detail;
    if (Array.isArray(detail)) {
      return detail.map((item) => {
        if (item && typeof item === "object") {
          const loc = Array.isArray(item.loc) ? item.loc.filter((p) => p !== "body").join(".") : "";
          return (loc ? loc + ": " : "") + (item.msg || JSON.stringify(item));
        }
        return String(item);
      }).join("; ");
    }
    if (detail === undefined || detail === null) return "";
    return JSON.stringify(detail);
  }

  class ApiError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  /** "Upload failed (HTTP 415): detail" */
  function failure(what, e) {
    const status = e && e.status ? " (HTTP " + e.status + ")" : "";
    return what + status + ": " + (e && e.message ? e.message : String(e));
  }

  // ---------------------------------------------------------------- API key

  function getKey() {
    try { return localStorage.getItem(KEY_STORAGE) || ""; } catch (e) { return ""; }
  }

  function setKey(key) {
    try {
      if (key) localStorage.setItem(KEY_STORAGE, key);
      else localStorage.removeItem(KEY_STORAGE);
    } catch (e) { /* storage disabled: the key lives in the field only */ }
  }

  /** The key in the field (filled from storage at load): what is sent, saved or not. */
  function currentKey() {
    return $("api-key").value.trim();
  }

  function authHeaders() {
    const key = currentKey();
    return key ? { Authorization: "Bearer " + key } : {};
  }

  function renderAuthState() {
    show($("auth-state"), getKey() ? "A key is saved in this browser and sent with every request."
      : "No key saved: requests are sent without one.");
  }

  function noteAuthFailure(status, detail) {
    const what = status === 401
      ? (currentKey() ? "The server rejected the API key" : "This server needs an API key")
      : "The API key is not allowed to do this";
    show($("auth-message"), what + " (HTTP " + status + (detail ? ": " + detail : "") + "). "
      + "Enter a valid key above and press Save.");
  }

  function clearAuthFailure() {
    show($("auth-message"), "");
  }

  // ---------------------------------------------------------------- fetch

  async function errorFrom(response) {
    let detail = "";
    try {
      const text = await response.text();
      try { detail = formatDetail(JSON.parse(text).detail); } catch (e) { detail = text.slice(0, 300); }
    } catch (e) { /* body unreadable */ }
    if (response.status === 401 || response.status === 403) noteAuthFailure(response.status, detail);
    return new ApiError(response.status, detail || ("HTTP " + response.status + " " + response.statusText));
  }

  /** fetch() under /api/v1 with the key; returns the parsed JSON (null for 204), throws ApiError.
   *  options.public: an endpoint that needs no key (its success says nothing about the key). */
  async function api(path, options) {
    const opts = Object.assign({}, options || {});
    const isPublic = Boolean(opts.public);
    delete opts.public;
    opts.headers = Object.assign({ Accept: "application/json" }, authHeaders(), opts.headers || {});
    if (opts.json !== undefined) {
      opts.headers["Content-Type"] = "application/json";
      opts.body = JSON.stringify(opts.json);
      delete opts.json;
    }
    let response;
    try {
      response = await fetch(API + path, opts);
    } catch (e) {
      if (e && e.name === "AbortError") throw e;
      throw new ApiError(0, "Cannot reach the server (" + (e && e.message ? e.message : e) + ")");
    }
    if (!response.ok) throw await errorFrom(response);
    if (!isPublic) clearAuthFailure();
    if (response.status === 204) return null;
    const text = await response.text();
    return text ? JSON.parse(text) : null;
  }

  // ---------------------------------------------------------------- upload

  function documentSummary(doc) {
    const meta = el("dl", { className: "meta" });
    const rows = [
      ["Title", doc.title], ["Filename", doc.filename], ["Id", doc.id], ["Type", doc.mime_type],
      ["Size", fmtSize(doc.size)], ["Tags", (doc.tags || []).join(", ") || "—"],
      ["Parts", doc.parts], ["Chunks", doc.chunk_count], ["Status", doc.status],
      ["Created", fmtDate(doc.created_at)],
    ];
    for (const [name, value] of rows) {
      meta.append(el("dt", null, name), el("dd", { dataset: { field: name.toLowerCase() } }, value ?? ""));
    }
    return meta;
  }

  async function onUpload(event) {
    event.preventDefault();
    const fileInput = $("upload-file");
    const file = fileInput.files && fileInput.files[0];
    show($("upload-error"), "");
    const result = $("upload-result");
    if (!file) {
      show($("upload-error"), "Choose a file to upload.");
      return;
    }
    const uploadForm = $("upload-form");
    uploadForm.dataset.state = "loading";
    const form = new FormData();
    form.append("file", file, file.name);
    const title = $("upload-title").value.trim();
    if (title) form.append("title", title);
    const tags = $("upload-tags").value.trim();
    if (tags) form.append("tags", tags);
    $("upload-submit").disabled = true;
    $("upload-status").textContent = "Uploading and indexing " + file.name + "…";
    try {
      let doc = await api("/documents", { method: "POST", body: form });
      if (doc.status === "processing") { // a large file: indexed in the background, its status polled here
        result.replaceChildren(el("p", { testid: "upload-processing" },
          "Indexing “" + doc.title + "” in the background…"), documentSummary(doc));
        result.dataset.documentId = doc.id;
        result.hidden = false;
        await loadDocuments();
        $("upload-status").textContent = "Indexing " + file.name + " in the background…";
        doc = await untilIndexed(doc);
      }
      if (doc.status === "failed") throw new ApiError(422, doc.reason || "indexing failed");
      result.replaceChildren(el("p", { className: "ok", testid: "upload-ok" }, "Indexed “" + doc.title + "”."),
        documentSummary(doc));
      result.dataset.documentId = doc.id;
      result.hidden = false;
      fileInput.value = "";
      $("upload-title").value = "";
      $("upload-tags").value = "";
      await loadDocuments();
      uploadForm.dataset.state = "done";
    } catch (e) {
      result.hidden = true;
      delete result.dataset.documentId;
      show($("upload-error"), failure("Upload of " + file.name + " failed", e));
      uploadForm.dataset.state = "error";
    } finally {
      $("upload-submit").disabled = false;
      $("upload-status").textContent = "";
    }
  }

  /** Poll an upload that is being indexed in the background until it is indexed or failed (1 s apart). */
  async function untilIndexed(doc) {
    while (doc.status === "processing") {
      await new Promise((resolve) => setTimeout(resolve, 1000));
      doc = await api("/documents/" + encodeURIComponent(doc.id));
    }
    await loadDocuments();
    return doc;
  }

  // ---------------------------------------------------------------- documents

  const docsState = { page: 1, perPage: 20, total: 0, selected: null, generation: 0 };

  function docsQuery() {
    const params = new URLSearchParams();
    params.set("page", String(docsState.page));
    params.set("per_page", String(docsState.perPage));
    for (const tag of splitList($("docs-tag-filter").value) || []) params.append("tag", tag);
    return params.toString();
  }

  async function loadDocuments() {
    const body = $("docs-body");
    const generation = ++docsState.generation;
    body.dataset.state = "loading";
    show($("docs-error"), "");
    let data;
    try {
      data = await api("/documents?" + docsQuery());
    } catch (e) {
      if (generation !== docsState.generation) return; // a newer listing is under way
      show($("docs-error"), failure("Could not list documents", e));
      body.dataset.state = "error";
      return;
    }
    if (generation !== docsState.generation) return;
    const pages = Math.max(1, Math.ceil((data.total || 0) / (data.per_page || docsState.perPage)));
    if ((data.items || []).length === 0 && docsState.page > 1 && docsState.page > pages) {
      docsState.page = pages; // the last page emptied (a delete): show the one before
      return loadDocuments();
    }
    docsState.total = data.total || 0;
    body.replaceChildren(...(data.items || []).map(docRow));
    body.dataset.total = String(docsState.total);
    body.dataset.state = "done";
    $("docs-empty").hidden = (data.items || []).length > 0;
    $("docs-page-info").textContent = "Page " + docsState.page + " of " + pages + " · "
      + docsState.total + " document" + (docsState.total === 1 ? "" : "s");
    $("docs-prev").disabled = docsState.page <= 1;
    $("docs-next").disabled = docsState.page >= pages;
  }

  function docRow(doc) {
    const del = el("button", { type: "button", className: "danger small", testid: "doc-delete",
      title: "Delete " + (doc.filename || doc.title) }, "Delete");
    del.addEventListener("click", (event) => {
      event.stopPropagation();
      deleteDocument(doc);
    });
    const row = el("tr", { testid: "doc-row", tabIndex: 0, dataset: { documentId: doc.id } },
      el("td", { testid: "doc-title" }, doc.title),
      el("td", { testid: "doc-filename" }, doc.filename),
      el("td", { testid: "doc-tags" }, ...(doc.tags || []).map((t) => el("span", { className: "tag" }, t))),
      el("td", { className: "num", testid: "doc-parts" }, doc.parts),
      el("td", { className: "num", testid: "doc-chunks" }, doc.chunk_count),
      el("td", { testid: "doc-status", title: doc.reason || "" }, doc.status || "indexed"),
      el("td", { testid: "doc-created", title: doc.created_at }, fmtDate(doc.created_at)),
      el("td", null, del));
    if (doc.id === docsState.selected) row.classList.add("selected");
    row.addEventListener("click", () => showDetail(doc.id));
    row.addEventListener("keydown", (event) => {
      if (event.key === "Enter") showDetail(doc.id);
    });
    return row;
  }

  async function deleteDocument(doc) {
    if (!window.confirm("Delete “" + doc.title + "”" + (doc.filename ? " (" + doc.filename + ")" : "") + "?")) return;
    show($("docs-error"), "");
    try {
      await api("/documents/" + encodeURIComponent(doc.id), { method: "DELETE" });
    } catch (e) {
      show($("docs-error"), failure("Could not delete “" + doc.title + "”", e));
      return;
    }
    if (docsState.selected === doc.id) closeDetail();
    await loadDocuments();
  }

  function closeDetail() {
    docsState.selected = null;
    $("doc-detail").hidden = true;
    for (const row of $("docs-body").querySelectorAll("tr.selected")) row.classList.remove("selected");
  }

  async function showDetail(id) {
    docsState.selected = id;
    for (const row of $("docs-body").querySelectorAll("tr")) {
      row.classList.toggle("selected", row.dataset.documentId === id);
    }
    const panel = $("doc-detail");
    $("doc-detail-title").textContent = "Loading…";
    $("doc-detail-meta").replaceChildren();
    $("doc-detail-chunks").replaceChildren();
    panel.hidden = false;
    let doc;
    try {
      doc = await api("/documents/" + encodeURIComponent(id));
    } catch (e) {
      $("doc-detail-title").textContent = failure("Could not load the document", e);
      return;
    }
    if (docsState.selected !== id) return; // another row was clicked meanwhile
    panel.dataset.documentId = doc.id;
    $("doc-detail-title").textContent = doc.title;
    $("doc-detail-meta").replaceChildren(...documentSummary(doc).childNodes);
    $("doc-detail-chunks").replaceChildren(...(doc.chunks || []).map((chunk) => {
      const where = [];
      if (chunk.page !== null && chunk.page !== undefined) where.push("page " + chunk.page);
      if (chunk.row !== null && chunk.row !== undefined) where.push("row " + chunk.row);
      where.push("split " + chunk.split_index);
      return el("li", { testid: "doc-chunk", dataset: { chunkId: chunk.chunk_id } },
        el("div", { className: "chunk-head" }, "#" + chunk.chunk_index + " · " + where.join(" · ")),
        el("div", { className: "chunk-text" }, chunk.content));
    }));
  }

  // ---------------------------------------------------------------- search

  function legCell(label, rank, score, testid) {
    const found = typeof rank === "number";
    return el("span", { className: "leg" + (found ? "" : " missing"), testid },
      el("span", { className: "leg-name" }, label + ": "),
      found ? "#" + rank + " (" + fmtScore(score) + ")" : "—");
  }

  function hitItem(hit) {
    const where = [];
    if (hit.page !== null && hit.page !== undefined) where.push("page " + hit.page);
    return el("li", { testid: "search-result", dataset: { documentId: hit.document_id || "", chunkId: hit.chunk_id } },
      el("div", { className: "hit-head" },
        el("span", { className: "rank", testid: "result-rank" }, "#" + hit.rank),
        el("span", { className: "doc", testid: "result-title" }, docLabel(hit)),
        where.length ? el("span", { className: "muted", testid: "result-page" }, where.join(" · ")) : null,
        el("span", { className: "score", testid: "result-score", title: "fused score" }, "score " + fmtScore(hit.score))),
      el("div", { className: "why", testid: "result-why" },
        legCell("vector", hit.vector_rank, hit.vector_score, "result-vector"),
        legCell("keyword", hit.keyword_rank, hit.keyword_score, "result-keyword")),
      el("p", { className: "snippet", testid: "result-snippet", title: hit.content }, snippet(hit.content, SNIPPET_CHARS)),
      alsoIn(hit, "result-also"));
  }

  async function onSearch(event) {
    event.preventDefault();
    const query = $("search-query").value.trim();
    show($("search-error"), "");
    if (!query) {
      show($("search-error"), "Type a query.");
      return;
    }
    const thresholdText = $("search-threshold").value.trim();
    const body = {
      query,
      top_k: parseInt($("search-top-k").value, 10) || null, // null: the index's own k
      score_threshold: thresholdText === "" ? null : Number(thresholdText),
      search_mode: $("search-mode").value || null, // null: the index's own search_mode
      tags: splitList($("search-tags").value),
    };
    const list = $("search-results");
    list.dataset.state = "loading";
    list.setAttribute("aria-busy", "true");
    $("search-submit").disabled = true;
    $("search-status").textContent = "Searching…";
    try {
      const data = await api("/search", { method: "POST", json: body });
      const results = data.results || [];
      list.replaceChildren(...results.map(hitItem));
      list.dataset.query = data.query;
      list.dataset.state = "done";
      $("search-status").textContent = results.length
        ? results.length + " result" + (results.length === 1 ? "" : "s") + " (" + (body.search_mode || "index default") + ")"
        : "No results.";
    } catch (e) {
      list.replaceChildren();
      $("search-status").textContent = "";
      show($("search-error"), failure("Search failed", e));
      list.dataset.state = "error";
    } finally {
      list.removeAttribute("aria-busy");
      $("search-submit").disabled = false;
    }
  }

  // ---------------------------------------------------------------- chat

  const chat = { history: [], controller: null };

  function sourceItem(source) {
    const where = source.page !== null && source.page !== undefined ? " · page " + source.page : "";
    return el("li", { testid: "chat-source", dataset: { documentId: source.document_id || "", chunkId: source.chunk_id } },
      el("div", { className: "hit-head" },
        el("span", { className: "rank" }, "[" + source.n + "]"),
        el("span", { className: "doc", testid: "source-title" }, docLabel(source) + where),
        el("span", { className: "score" }, "score " + fmtScore(source.score))),
      el("p", { className: "snippet" }, snippet(source.content, SNIPPET_CHARS)),
      alsoIn(source, "source-also"));
  }

  /** Parse a text/event-stream body; call onEvent(parsedJson) for each event's data. */
  async function readEvents(response, onEvent) {
    const reader = response.body.getReader();
    const decoder = new TextDecoder("utf-8");
    let buffer = "";
    let data = [];
    const dispatch = () => {
      if (!data.length) return;
      const payload = data.join("\n");
      data = [];
      onEvent(JSON.parse(payload));
    };
    const consumeLine = (line) => {
      if (line === "") dispatch();
      else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      // "event:", "id:", "retry:" and ":" comments are ignored
    };
    try {
      for (;;) {
        const { value, done } = await reader.read();
        buffer += decoder.decode(value || new Uint8Array(), { stream: !done });
        let cut;
        while ((cut = buffer.search(/\r\n|\r|\n/)) >= 0) {
          const line = buffer.slice(0, cut);
          buffer = buffer.slice(cut + (buffer.startsWith("\r\n", cut) ? 2 : 1));
          consumeLine(line);
        }
        if (done) break;
      }
      if (buffer) consumeLine(buffer);
      dispatch();
    } catch (e) {
      reader.cancel().catch(() => {});
      throw e;
    }
  }

  function setChatBusy(busy) {
    $("chat-submit").disabled = busy;
    $("chat-stop").hidden = !busy;
    $("chat-question").readOnly = busy;
  }

  async function onChat(event) {
    event.preventDefault();
    const question = $("chat-question").value.trim();
    show($("chat-error"), "");
    if (!question) {
      show($("chat-error"), "Type a question.");
      return;
    }
    const answer = el("div", { className: "answer", testid: "chat-answer", "aria-live": "polite" });
    const badge = el("span", { className: "badge", testid: "chat-extractive", hidden: true });
    const sources = el("ol", { className: "results sources", testid: "chat-sources" });
    const turn = el("div", { className: "turn", testid: "chat-turn", dataset: { state: "streaming" } },
      el("div", { className: "question", testid: "chat-turn-question" }, question),
      el("div", { className: "answer-head" }, el("span", { className: "muted" }, "Answer"), badge),
      answer,
      el("details", { className: "sources-box", open: true }, el("summary", null, "Sources"), sources));
    $("chat-log").append(turn);
    turn.scrollIntoView({ block: "nearest" });

    const body = {
      question,
      history: chat.history.slice(-MAX_HISTORY_TURNS),
      tags: splitList($("chat-tags").value),
    };
    chat.controller = new AbortController();
    setChatBusy(true);
    $("chat-status").textContent = "Thinking…";
    let text = "";
    let finished = false;
    try {
      let response;
      try {
        response = await fetch(API + "/chat/stream", {
          method: "POST",
          headers: Object.assign({ "Content-Type": "application/json", Accept: "text/event-stream" }, authHeaders()),
          body: JSON.stringify(body),
          signal: chat.controller.signal,
        });
      } catch (e) {
        if (e && e.name === "AbortError") throw e;
        throw new ApiError(0, "Cannot reach the server (" + (e && e.message ? e.message : e) + ")");
      }
      if (!response.ok) throw await errorFrom(response);
      clearAuthFailure();
      $("chat-status").textContent = "Answering…";
      await readEvents(response, (message) => {
        if (message.detail !== undefined || message.error !== undefined) {
          throw new ApiError(500, formatDetail(message.detail !== undefined ? message.detail : message.error));
        }
        if (typeof message.content === "string" && message.content) {
          text += message.content;
          answer.append(document.createTextNode(message.content));
        }
        if (message.done) {
          finished = true;
          sources.replaceChildren(...(message.sources || []).map(sourceItem));
          if (!(message.sources || []).length) sources.append(el("li", { className: "muted" }, "No sources."));
          if (message.extractive) {
            badge.textContent = "Extractive: no language model; quoting the best passages";
            badge.classList.add("extractive");
            turn.dataset.extractive = "true";
          } else {
            badge.textContent = message.model ? "Model: " + message.model : "Generated";
            turn.dataset.extractive = "false";
          }
          badge.hidden = false;
        }
      });
      if (!finished) throw new ApiError(0, "The answer stream ended early.");
      turn.dataset.state = "done";
      chat.history.push({ role: "user", content: question }, { role: "assistant", content: text });
      $("chat-question").value = "";
    } catch (e) {
      turn.dataset.state = "error";
      if (e && e.name === "AbortError") {
        answer.append(el("span", { className: "muted" }, " [stopped]"));
      } else {
        show($("chat-error"), failure("Chat failed", e));
        if (!text) turn.remove();
      }
    } finally {
      chat.controller = null;
      setChatBusy(false);
      $("chat-status").textContent = "";
    }
  }

  function resetChat() {
    if (chat.controller) chat.controller.abort();
    chat.history = [];
    $("chat-log").replaceChildren();
    show($("chat-error"), "");
  }

  // ---------------------------------------------------------------- footer

  async function loadFooter() {
    try {
      const version = await api("/version", { public: true });
      $("version").textContent = "FinderLedge " + version.finderledge + " · API " + version.api;
      $("version").dataset.version = version.finderledge;
    } catch (e) {
      $("version").textContent = "FinderLedge (version unknown: " + e.message + ")";
    }
    try {
      const health = await api("/health", { public: true });
      $("health").textContent = "status: " + health.status;
      $("health").classList.toggle("error", health.status !== "ok");
    } catch (e) {
      $("health").textContent = e.status === 503 ? "status: failing" : "status: unreachable";
      $("health").classList.add("error");
    }
  }

  // ---------------------------------------------------------------- start

  function init() {
    const keyInput = $("api-key");
    keyInput.value = getKey();
    renderAuthState();
    $("auth-form").addEventListener("submit", (event) => {
      event.preventDefault();
      setKey(keyInput.value.trim());
      clearAuthFailure();
      renderAuthState();
      loadDocuments();
      loadFooter();
    });
    $("api-key-forget").addEventListener("click", () => {
      setKey("");
      keyInput.value = "";
      clearAuthFailure();
      renderAuthState();
      loadDocuments();
    });
    $("api-key-show").addEventListener("click", (event) => {
      const visible = keyInput.type === "password";
      keyInput.type = visible ? "text" : "password";
      event.currentTarget.textContent = visible ? "Hide" : "Show";
      event.currentTarget.setAttribute("aria-pressed", String(visible));
    });

    $("upload-form").addEventListener("submit", onUpload);

    const readPerPage = () => {
      const value = parseInt($("docs-per-page").value, 10);
      docsState.perPage = Math.min(100, Math.max(1, isNaN(value) ? 20 : value));
      $("docs-per-page").value = String(docsState.perPage);
    };
    $("docs-form").addEventListener("submit", (event) => {
      event.preventDefault();
      docsState.page = 1;
      readPerPage();
      loadDocuments();
    });
    $("docs-per-page").addEventListener("change", () => {
      if (!$("docs-per-page").value.trim()) return; // being retyped: wait for a number
      docsState.page = 1;
      readPerPage();
      loadDocuments();
    });
    $("docs-prev").addEventListener("click", () => {
      if (docsState.page > 1) { docsState.page -= 1; loadDocuments(); }
    });
    $("docs-next").addEventListener("click", () => { docsState.page += 1; loadDocuments(); });
    $("doc-detail-close").addEventListener("click", closeDetail);

    $("search-form").addEventListener("submit", onSearch);

    $("chat-form").addEventListener("submit", onChat);
    $("chat-question").addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        $("chat-form").requestSubmit();
      }
    });
    $("chat-stop").addEventListener("click", () => { if (chat.controller) chat.controller.abort(); });
    $("chat-reset").addEventListener("click", resetChat);

    loadFooter();
    loadDocuments().then(() => { document.body.dataset.ready = "true"; });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
