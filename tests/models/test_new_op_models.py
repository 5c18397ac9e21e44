"""Models that need the newer ONNX ops (issue 12), on the CPU backend through `kiln run`, against onnxruntime
(float32, rtol = atol = 1e-4): recurrent classifiers (LSTM, GRU with sequence_lens), a RoiAlign box head, a spatial
transformer (AffineGrid + GridSample), and a LLaMA-style decoder written with the opset-23 ops (RMSNormalization,
RotaryEmbedding, Attention with GQA) and with the opset-18 primitives torch's dynamo exporter emits."""
import numpy as np
import onnx
import pytest

from builders import llama, sequence_models, vision_heads
from test_models import check_against_ort, ort_run

CASES = {
    "lstm_classifier": (sequence_models.lstm_classifier, {}),
    "gru_classifier": (sequence_models.gru_classifier, {}),
    "lstm_classifier_2_layers": (sequence_models.lstm_classifier, dict(num_layers=2)),
    "gru_classifier_2_layers_full_lengths": (sequence_models.gru_classifier, dict(num_layers=2, lengths=(12, 12, 12))),
    "roi_head": (vision_heads.roi_head, {}),
    "roi_head_output_half_pixel": (vision_heads.roi_head, dict(coordinate_transformation_mode="output_half_pixel")),
    "roi_head_max": (vision_heads.roi_head, dict(mode="max")),
    "spatial_transformer": (vision_heads.spatial_transformer, {}),
    "spatial_transformer_align_corners": (vision_heads.spatial_transformer, dict(align_corners=1)),
    "llama_opset23": (llama.build_opset23, {}),
    "llama_opset18": (llama.build_opset18, {}),
    "llama_opset23_mqa_batch1_seq5": (llama.build_opset23, dict(kv_heads=1, batch=1, seq=5)),
    "llama_opset23_mha": (llama.build_opset23, dict(kv_heads=4)),
    "llama_opset18_batch3_seq9": (llama.build_opset18, dict(batch=3, seq=9)),
}


def _save(tmp_path, name, **extra):
    build, kwargs = CASES[name]
    model, feeds = build(seed=1, **{**kwargs, **extra})
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, str(path))
    return model, feeds, path


@pytest.mark.parametrize("name", list(CASES))
def test_new_op_model_matches_onnxruntime(kiln, tmp_path, name):
    model, feeds, path = _save(tmp_path, name)
    check_against_ort(kiln, path, feeds, [o.name for o in model.graph.output], tmp_path / "run")


@pytest.mark.parametrize("name", list(CASES))
def test_builder_is_sane(tmp_path, name):
    """Outputs are finite and O(1), so the 1e-4 comparison above means something."""
    _, feeds, path = _save(tmp_path, name)
    for out_name, value in ort_run(path, feeds).items():
        assert np.isfinite(value).all(), out_name
        assert 1e-2 < float(np.std(value)) < 1e2, f"{out_name}: std {np.std(value)}"


def test_llama_layouts_compute_the_same_function(tmp_path):
    """The opset-23 and opset-18 decoders share weights and agree in onnxruntime, so both kiln tests check the same
    RMSNorm / rotary / causal GQA attention semantics."""
    _, feeds23, p23 = _save(tmp_path, "llama_opset23")
    _, feeds18, p18 = _save(tmp_path, "llama_opset18")
    np.testing.assert_array_equal(feeds23["input_ids"], feeds18["input_ids"])
    np.testing.assert_allclose(ort_run(p23, feeds23)["logits"], ort_run(p18, feeds18)["logits"], rtol=1e-5,
                               atol=1e-5)


def test_recurrent_outputs_are_zero_past_each_length(tmp_path):
    """sequence_lens is in effect: Y is zero past each sequence's length (so a kiln ignoring it would mismatch)."""
    for name in ("lstm_classifier", "gru_classifier"):
        _, feeds, path = _save(tmp_path, name)
        y = ort_run(path, feeds)["Y"]
        for b, n in enumerate(feeds["seq_lens"]):
            assert not y[n:, :, b].any() and y[:n, :, b].any(), (name, b)
