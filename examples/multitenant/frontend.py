"""MochiRAG's Streamlit UI: log in (or sign up), upload files into datasets, chat with a chosen strategy and read
the answer with its sources.  It talks to the backend over HTTP only (``MOCHIRAG_API_URL``).

Run:  MOCHIRAG_API_URL=http://127.0.0.1:8000 streamlit run examples/multitenant/frontend.py
"""

from __future__ import annotations

import os
from collections import defaultdict
from typing import Any

import httpx
import streamlit as st

API = os.environ.get("MOCHIRAG_API_URL", "http://127.0.0.1:8000").rstrip("/")
TIMEOUT = 300.0  # an LLM strategy asks the model twice


def call(method: str, path: str, **kwargs: Any) -> httpx.Response:
    """One request to the backend with the user's token (when logged in)."""
    token = st.session_state.get("token")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.request(method, API + path, headers=headers, timeout=TIMEOUT, **kwargs)


def detail(response: httpx.Response) -> str:
    try:
        return str(response.json().get("detail"))
    except ValueError:
        return response.text[:300]


def login_page() -> None:
    st.subheader("Log in")
    username = st.text_input("User name", key="username")
    password = st.text_input("Password", type="password", key="password")
    log_in, sign_up = st.columns(2)
    if sign_up.button("Sign up", key="signup"):
        r = call("POST", "/users/", json={"username": username, "password": password})
        if r.status_code != 201:
            st.error(f"Sign-up failed: {detail(r)}")
            return
    elif not log_in.button("Log in", key="login"):
        return
    r = call("POST", "/token", data={"username": username, "password": password})
    if r.status_code != 200:
        st.error(f"Login failed: {detail(r)}")
        return
    st.session_state["token"] = r.json()["access_token"]
    st.session_state["user"] = username
    st.session_state["messages"] = []
    st.rerun()


def datasets_panel() -> list[str]:
    """Upload into a dataset; list the user's files by dataset.  Returns the dataset names."""
    st.subheader("Datasets")
    with st.form("upload", clear_on_submit=True):
        dataset = st.text_input("Dataset", value="default", key="dataset")
        file = st.file_uploader("File (PDF, DOCX, text, Markdown, HTML, CSV, JSON)", key="file")
        if st.form_submit_button("Upload") and file is not None:
            r = call(
                "POST",
                "/api/v1/documents",
                data={"dataset_id": dataset},
                files={"file": (file.name, file.getvalue(), file.type or "application/octet-stream")},
            )
            if r.status_code == 201:
                doc = r.json()
                st.success(f"Uploaded {doc['filename']} to {doc['dataset_id']} ({doc['status']})")
            else:
                st.error(f"Upload failed: {detail(r)}")
    r = call("GET", "/api/v1/documents", params={"per_page": 100})
    files: dict[str, list[str]] = defaultdict(list)
    for doc in r.json()["items"] if r.status_code == 200 else []:
        files[doc.get("dataset_id") or "(none)"].append(doc["filename"])
    for name, names in sorted(files.items()):
        st.markdown(f"**{name}**: " + ", ".join(sorted(names)))
    return sorted(files)


def chat_panel(datasets: list[str]) -> None:
    r = call("GET", "/chat/strategies/")
    if r.status_code != 200:
        st.error(f"The backend refused: {detail(r)}")
        return
    offered = [s for s in r.json()["strategies"] if s["available"]]
    names = [s["name"] for s in offered]
    default = r.json()["default"]
    strategy = st.selectbox(
        "Strategy", names, index=names.index(default) if default in names else 0, key="strategy"
    )
    st.caption(next(s["description"] for s in offered if s["name"] == strategy))
    chosen = st.multiselect("Search in datasets (none: all)", datasets, key="datasets")
    for message in st.session_state["messages"]:
        with st.chat_message(message["role"]):
            st.markdown(message["content"])
            for s in message.get("sources", []):
                st.caption(f"[{s['n']}] {s['filename']} ({s['dataset_id']}): {s['content'][:300]}")
    question = st.chat_input("Ask about your documents")
    if not question:
        return
    r = call(
        "POST",
        "/chat/query/",
        json={"question": question, "strategy": strategy, "dataset_ids": chosen or None},
    )
    st.session_state["messages"].append({"role": "user", "content": question})
    if r.status_code != 200:
        st.session_state["messages"].append({"role": "assistant", "content": f"Error: {detail(r)}"})
    else:
        body = r.json()
        st.session_state["messages"].append(
            {"role": "assistant", "content": body["answer"], "sources": body["sources"]}
        )
    st.rerun()


def main() -> None:
    st.set_page_config(page_title="MochiRAG")
    st.title("MochiRAG")
    if "token" not in st.session_state:
        login_page()
        return
    with st.sidebar:
        st.write(f"Logged in as **{st.session_state['user']}**")
        if st.button("Log out", key="logout"):
            st.session_state.clear()
            st.rerun()
        datasets = datasets_panel()
    chat_panel(datasets)


main()
