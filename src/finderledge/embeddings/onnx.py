"""The bundled all-MiniLM-L6-v2 through ONNX Runtime: exported locally on first use, int8 or fp32, verified.

``FinderLedge(embedding="onnx")`` (or ``"onnx-int8"``) runs the default model quantized to int8 (per-channel
weights of every MatMul); ``"onnx-fp32"`` runs the same graph unquantized.  Nothing is downloaded: the first
use exports the bundled weights with torch (mean pooling and L2 normalisation inside the graph), applies ONNX
Runtime's BERT fusions, quantizes, and checks the int8 vectors against sentence-transformers' fp32 vectors on
built-in sentences.  Below :data:`DEFAULT_MIN_AGREEMENT` mean cosine the int8 model is refused with a warning
and fp32 is used instead.  The files are cached under ``$FINDERLEDGE_CACHE_DIR`` (default
``~/.cache/finderledge``) in ``onnx/<model hash>/``, built in a temporary folder and renamed into place under
a file lock, so two processes starting at once build it once.  See ``docs/embeddings.md``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import shutil
import tempfile
import threading
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from ..progress import heartbeat
from ..storage.paths import cache_root
from .loading import BackgroundLoad
from .names import ONNX_ALIASES
from .names import ONNX_MODEL_NAME as MODEL_NAME
from .sentence_transformer import (
    SentenceTransformerEmbeddings,
    default_model_path,
    quiet_transformers,
)

__all__ = [
    "DEFAULT_MIN_AGREEMENT",
    "EXACT_INT8_PRODUCTS",
    "ONNX_ALIASES",
    "OnnxEmbeddings",
    "cache_root",
    "create_fp32",
    "create_int8",
    "onnx_model_id",
]

logger = logging.getLogger(__name__)

DEFAULT_MIN_AGREEMENT = (
    0.985  # mean cosine, int8 vs sentence-transformers fp32, on VERIFY_SENTENCES (healthy: 0.993)
)
FP32_MIN_AGREEMENT = (
    0.9999  # the fp32 export must reproduce sentence-transformers (else the export is broken)
)
FORMAT = 1  # bump when the export changes: a new cache folder is built
INPUTS = ("input_ids", "attention_mask", "token_type_ids")

VERIFY_SENTENCES = (
    "The cat sat on the mat.",
    "hello world",
    "A",
    "How do I reset my password if I no longer have access to my email account?",
    "Refunds are issued within 30 days of purchase, minus a 5% handling fee.",
    "Photosynthesis converts light energy into chemical energy stored in glucose.",
    "The mitochondrial membrane potential collapsed after treatment with 10 µM FCCP (p < 0.001).",
    "SELECT name, count(*) FROM users GROUP BY name HAVING count(*) > 1;",
    "def embed(texts: list[str]) -> np.ndarray: return model.encode(texts)",
    "Der schnelle braune Fuchs springt über den faulen Hund.",
    "東京駅から新大阪駅まで新幹線でおよそ2時間半かかります。",
    "What is the capital of Australia?",
    "Canberra is the capital city of Australia, chosen as a compromise between Sydney and Melbourne.",
    "Breaking: markets fell sharply on Tuesday as investors reacted to the surprise interest-rate hike.",
    "To be, or not to be, that is the question.",
    "Vitamin D deficiency is associated with an increased risk of respiratory infections in children.",
    "The patient presented with fever, cough and shortness of breath; chest X-ray showed bilateral infiltrates.",
    "Install the package with pip and run the command line tool with --help to list its options.",
    "!!! ??? ... --- ###",
    " ".join(["Long documents are truncated to the model's maximum sequence length of 256 tokens."] * 30),
    "Ice cream sales and drowning incidents both rise in summer, but one does not cause the other.",
    "The committee postponed its decision until the independent audit of the accounts is complete.",
    "Quantum entanglement links the states of two particles regardless of the distance between them.",
    "My flight was delayed by three hours and the airline offered a meal voucher as compensation.",
)


def onnx_model_id(variant: str) -> str:
    """The model identity recorded in a directory: backend and quantization are part of it."""
    return f"onnx-{variant}:{MODEL_NAME}"


def _model_hash(model_path: Path) -> str:
    """Names, sizes and small files' contents of the model folder, plus :data:`FORMAT` (no 90 MB read)."""
    digest = hashlib.sha256(f"format={FORMAT}".encode())
    for file in sorted(p for p in model_path.rglob("*") if p.is_file()):
        size = file.stat().st_size
        digest.update(f"{file.relative_to(model_path).as_posix()}:{size}".encode())
        if size < 1_000_000:
            digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


def _machine() -> str:
    """What int8 kernels depend on: the CPU's architecture and vector extensions, and ONNX Runtime's version."""
    import onnxruntime

    flags = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            line = next((ln for ln in fh if ln.startswith("flags")), "")
        flags = " ".join(sorted(f for f in line.split() if f.startswith(("avx", "amx", "sse4", "neon"))))
    except OSError:
        pass
    return f"{platform.machine()}|{flags}|onnxruntime {onnxruntime.__version__}"


def _tokenizer(model_path: Path) -> Any:
    """The model's fast tokenizer, truncating at its ``max_seq_length`` and never padding (one text per run)."""
    from tokenizers import Tokenizer

    max_len = 256
    config = model_path / "sentence_bert_config.json"
    if config.is_file():
        max_len = int(json.loads(config.read_text(encoding="utf-8")).get("max_seq_length", max_len))
    tokenizer = Tokenizer.from_file(str(model_path / "tokenizer.json"))
    tokenizer.enable_truncation(
        max_len
    )  # tokenizer.json says 128 (and pads to 128): sentence-transformers uses 256
    tokenizer.no_padding()
    return tokenizer


def _run(session: Any, tokenizer: Any, texts: Sequence[str], batch_size: int) -> np.ndarray:
    """Embed ``texts`` one per run, tokenized ``batch_size`` at a time.

    One text per run has no padding (measured 1.5x faster than length-sorted batches of 32 on 2 cores) and
    makes a text's int8 vector independent of its neighbours: dynamic quantization scales a whole batch.
    """
    out = np.empty((len(texts), 0), dtype=np.float32)
    for start in range(0, len(texts), batch_size):
        for offset, encoding in enumerate(tokenizer.encode_batch(list(texts[start : start + batch_size]))):
            ids = np.asarray(encoding.ids, dtype=np.int64)[None, :]
            vector = session.run(
                None,
                {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)},
            )[0][0]
            if out.shape[1] == 0:
                out = np.empty((len(texts), vector.shape[0]), dtype=np.float32)
            out[start + offset] = vector
    return out


#: ONNX Runtime's x86-64 int8 matrix products without VNNI (AVX2, AVX-512 without VNNI) pair u8 x s8 products
#: into 16-bit sums that can saturate, where VNNI's are exact: the same text got another vector on each kind of
#: CPU (relevance 0.485 on an AVX2 machine, 0.470 on an AVX-512 VNNI one, for the quick-start notebook's top
#: hit).  This option makes the machines without VNNI use the exact (slower) u8 x u8 products instead, so every
#: machine sharing an index embeds a text alike; on VNNI machines it changes nothing.
EXACT_INT8_PRODUCTS = ("session.x64quantprecision", "1")


def _session(path: Path, threads: int) -> Any:
    """An ONNX Runtime CPU session: ``threads`` intra-op threads, sequential, every graph optimisation, exact
    int8 products on every x86-64 CPU (:data:`EXACT_INT8_PRODUCTS`)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.add_session_config_entry(*EXACT_INT8_PRODUCTS)
    if threads > 1:  # spinning workers steal the CPU from other processes on a busy machine
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _agreement(vectors: np.ndarray, reference: np.ndarray) -> dict[str, float]:
    cosines = np.sum(vectors * reference, axis=1)
    return {"mean_cosine": float(cosines.mean()), "min_cosine": float(cosines.min())}


def _export(model_path: Path, target: Path) -> None:
    """Torch export of BERT + mean pooling + L2 normalisation (one graph, dynamic batch and length)."""
    import torch
    from transformers import AutoModel

    class Pooled(torch.nn.Module):
        def __init__(self, bert: Any) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            hidden = self.bert(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, dim=-1)

    with quiet_transformers():
        bert = AutoModel.from_pretrained(str(model_path)).eval()
    tokenizer = _tokenizer(model_path)
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # a padded example: the mask path is traced too
    encoded = tokenizer.encode_batch(["hello world", "a somewhat longer sentence to export"])
    ids = torch.tensor([e.ids for e in encoded], dtype=torch.long)
    mask = torch.tensor([e.attention_mask for e in encoded], dtype=torch.long)
    axes = {name: {0: "batch", 1: "sequence"} for name in INPUTS} | {"embedding": {0: "batch"}}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            Pooled(bert).eval(),
            (ids, mask, torch.zeros_like(ids)),
            str(target),
            input_names=list(INPUTS),
            output_names=["embedding"],
            dynamic_axes=axes,
            opset_version=17,
            dynamo=False,
        )


class _DropAdvice(logging.Filter):
    """Drops the quantizer's advice to pre-process the model (not applicable: the graph is already fused)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Please consider to run pre-processing")


def _build(model_path: Path, folder: Path, step: Callable[[str], None] = lambda name: None) -> None:
    """Export, fuse and quantize into ``folder``; keep sentence-transformers' vectors of VERIFY_SENTENCES
    (the int8 check runs on each machine against them) and check the fp32 graph reproduces them."""
    try:
        import onnx
        from onnxruntime.quantization import QuantType, quantize_dynamic
        from onnxruntime.transformers.optimizer import optimize_model
    except ImportError as exc:
        raise ImportError("embedding 'onnx' needs the onnx package: pip install 'finderledge[onnx]'") from exc

    raw = folder / "raw.onnx"
    step("1/5 tracing the model with torch")
    _export(model_path, raw)
    step("2/5 fusing the graph")
    config = json.loads((model_path / "config.json").read_text(encoding="utf-8"))
    fused = optimize_model(
        str(raw),
        model_type="bert",
        num_heads=config["num_attention_heads"],
        hidden_size=config["hidden_size"],
        opt_level=1,
    )
    fused.save_model_to_file(str(folder / "fp32.onnx"))
    raw.unlink()
    step("3/5 quantizing to int8")
    advice = _DropAdvice()
    logging.getLogger().addFilter(advice)  # the quantizer logs a pre-processing hint to the root logger
    try:
        quantize_dynamic(
            folder / "fp32.onnx",
            folder / "int8.onnx",
            weight_type=QuantType.QInt8,
            per_channel=True,
            op_types_to_quantize=["MatMul"],
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
        )  # needed after fusion
    finally:
        logging.getLogger().removeFilter(advice)
    step("4/5 reference vectors from sentence-transformers")
    reference = np.asarray(
        SentenceTransformerEmbeddings(str(model_path)).embed_documents(list(VERIFY_SENTENCES)),
        dtype=np.float32,
    )
    np.save(folder / "reference.npy", reference)
    tokenizer = _tokenizer(model_path)
    step("5/5 checking the fp32 graph against them")
    fp32 = _agreement(_run(_session(folder / "fp32.onnx", 1), tokenizer, VERIFY_SENTENCES, 8), reference)
    if fp32["mean_cosine"] < FP32_MIN_AGREEMENT:
        raise ValueError(f"the ONNX export of {model_path} does not reproduce its fp32 vectors: {fp32}")
    (folder / "build.json").write_text(json.dumps({"format": FORMAT, "model": str(model_path), "fp32": fp32}))


def _ensure_built(model_path: Path, checkpoint: Callable[[], None] = lambda: None) -> Path:
    """The cache folder of ``model_path``'s ONNX files, built once (atomically, one process at a time).

    ``checkpoint`` is called while waiting for another process's build and between the build's steps (a
    background load that was asked to stop raises there; the partial build is removed)."""
    from filelock import FileLock, Timeout

    root = cache_root() / "onnx"
    final = root / _model_hash(model_path)
    if (final / "build.json").is_file():
        return final
    root.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(final) + ".lock")
    while True:
        checkpoint()
        try:
            lock.acquire(timeout=0.2)
            break
        except Timeout:
            continue
    try:
        if (final / "build.json").is_file():  # another process built it while this one waited
            return final
        # a warning, not info: a script that shows only warnings (as the quickstart) still says why it waits
        logger.warning(
            "exporting the default model to ONNX once for this machine (about 20 s, minutes on a busy "
            "machine; cached in %s)",
            final,
        )
        building = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=root))
        try:
            with heartbeat("exporting the default model to ONNX (once per machine)") as beat:

                def step(name: str) -> None:
                    checkpoint()
                    beat(name)

                _build(model_path, building, step)
            if final.exists():  # only without build.json (checked above): not a finished build
                shutil.rmtree(final)
            os.replace(building, final)
        finally:
            if building.exists():
                shutil.rmtree(building, ignore_errors=True)
    finally:
        lock.release()
    return final


def _verified(folder: Path, tokenizer: Any, threads: int) -> dict[str, Any]:
    """The int8 agreement with fp32 on this machine: measured once per machine, kept in ``folder``."""
    machine = _machine()
    record = folder / f"verify-{hashlib.sha256(machine.encode()).hexdigest()[:12]}.json"
    if record.is_file():
        measured: dict[str, Any] = json.loads(record.read_text(encoding="utf-8"))
        return measured
    reference = np.load(folder / "reference.npy")
    vectors = _run(_session(folder / "int8.onnx", threads), tokenizer, VERIFY_SENTENCES, 8)
    result = {"machine": machine, "sentences": len(VERIFY_SENTENCES), **_agreement(vectors, reference)}
    partial = record.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text(json.dumps(result), encoding="utf-8")
    os.replace(partial, record)  # atomic: a reader sees the whole record or none
    return result


def default_threads() -> int:
    """Intra-op threads: every core on machines of 1-2 cores (2 threads measured 1.28x one thread's passages/s
    when idle, and no slower under heavy load), else half the cores (about the physical ones), at most 8."""
    cores = os.cpu_count() or 1
    return cores if cores <= 2 else min(8, cores // 2)


class OnnxEmbeddings(Embeddings):
    """The bundled MiniLM through ONNX Runtime (``variant`` ``"int8"`` or ``"fp32"``); vectors L2-normalised.

    Loaded on first use; safe to call from several threads (ONNX Runtime sessions are thread-safe)."""

    def __init__(
        self,
        variant: str = "int8",
        *,
        batch_size: int = 64,
        num_threads: int | None = None,
        min_agreement: float = DEFAULT_MIN_AGREEMENT,
    ) -> None:
        if variant not in ("int8", "fp32"):
            raise ValueError(f"ONNX variant must be 'int8' or 'fp32', got {variant!r}")
        self.variant = variant
        self.model_name = onnx_model_id(variant)
        self.batch_size = batch_size
        self.num_threads = num_threads or default_threads()
        self.min_agreement = min_agreement
        self.effective_variant: str | None = None  # the one running: int8 falls back to fp32 if it disagrees
        self.verification: dict[str, Any] | None = None
        self._session: Any = None
        self._tokenizer: Any = None
        self._lock = threading.Lock()  # guards loading; tokenizers and sessions are shared once loaded
        self._background = BackgroundLoad(lambda: self._loaded())  # stopped and joined at close and at exit

    def prefetch(self) -> None:
        """Start loading (or, the first time, exporting) the model in the background; no-op once loaded or
        while loading."""
        if self._session is None:
            self._background.start()

    def stop_prefetch(self, timeout: float | None = None) -> bool:
        """Stop a background load at its next step and wait for it (``FinderLedge.close()`` does): no thread is
        left inside ONNX Runtime.  True when none is left running."""
        return self._background.stop(timeout)

    def _loaded(self) -> tuple[Any, Any]:
        """The session and tokenizer, built and verified on first use."""
        checkpoint = self._background.checkpoint  # a stopped background load ends between two steps
        with self._lock:
            if self._session is None:
                checkpoint()
                model_path = Path(default_model_path())
                folder = _ensure_built(model_path, checkpoint)
                checkpoint()
                tokenizer = _tokenizer(model_path)
                variant = self.variant
                if variant == "int8":
                    checkpoint()
                    self.verification = _verified(folder, tokenizer, self.num_threads)
                    if self.verification["mean_cosine"] < self.min_agreement:
                        logger.warning(
                            "the int8 ONNX model agrees with fp32 at mean cosine %.4f (min %.4f) on this machine, "
                            "below the %.4f required: using the fp32 ONNX model instead (slower, same vectors as "
                            "sentence-transformers)",
                            self.verification["mean_cosine"],
                            self.verification["min_cosine"],
                            self.min_agreement,
                        )
                        variant = "fp32"
                checkpoint()
                self._session = _session(folder / f"{variant}.onnx", self.num_threads)
                self._tokenizer = tokenizer
                self.effective_variant = variant
                logger.info("ONNX embeddings: %s, %d thread(s), from %s", variant, self.num_threads, folder)
            return self._session, self._tokenizer

    def _encode(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        session, tokenizer = self._loaded()
        vectors: list[list[float]] = _run(session, tokenizer, list(texts), self.batch_size).tolist()
        return vectors

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed passages (one text per ONNX run: no padding, and a vector never depends on its batch)."""
        return self._encode(texts)

    def embed_query(self, text: str) -> list[float]:
        """Embed one query (MiniLM has no query prefix: a query embeds like a passage)."""
        return self._encode([text])[0]

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        """Embed many queries in batches (used by evaluation and query strategies)."""
        return self._encode(texts)


def create_int8(name: str, *, batch_size: int = 64, **options: Any) -> OnnxEmbeddings:
    """The ``onnx-int8`` provider (the default model): ``name`` is the bundled model's, checked by the caller."""
    return OnnxEmbeddings("int8", batch_size=batch_size, **options)


def create_fp32(name: str, *, batch_size: int = 64, **options: Any) -> OnnxEmbeddings:
    """The ``onnx-fp32`` provider: the same graph unquantized."""
    return OnnxEmbeddings("fp32", batch_size=batch_size, **options)
