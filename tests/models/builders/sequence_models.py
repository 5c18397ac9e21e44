"""Recurrent sequence classifiers laid out as torch.onnx exports them (opset 17).

- lstm_classifier: nn.Embedding -> nn.LSTM(bidirectional, batch_first) over padded sequences with their lengths
  -> torch.cat((h_n[-2], h_n[-1]), 1) -> nn.Linear. The exporter writes Gather (embedding), Transpose to
  [seq, batch, feat], LSTM with W/R/B in ONNX gate order (i, o, f, c), sequence_lens (int32) and zero initial_h /
  initial_c, then Gather(-2) / Gather(-1) of Y_h, Concat on axis 1 and Gemm(transB=1). Y (per-step outputs, zero
  past each sequence's length) is a second output so every step is compared, not only the final states.
  num_layers=2 stacks two LSTM nodes joined by Transpose + Reshape of Y to [seq, batch, 2*hidden] (torch's layout).
- gru_classifier: the same with nn.GRU: GRU with linear_before_reset=1 (PyTorch's GRU formula), gate order (z, r, h).
"""
import numpy as np

from .common import FLOAT, INT64, GraphBuilder

OPSET = 17


def _recurrent_classifier(kind, seed, batch, seq, vocab, embed, hidden, classes, lengths, num_layers):
    g = GraphBuilder(seed)
    gates = 4 if kind == "LSTM" else 3
    emb = g.normal("embedding.weight", (vocab, embed), 1.0)
    x = g.op("Gather", [emb, "input_ids"], scope="/embedding", axis=0)            # [B, S, E]
    xt = g.op("Transpose", [x], scope=f"/{kind.lower()}", perm=[1, 0, 2])        # [S, B, E]
    k = 1.0 / np.sqrt(hidden)  # PyTorch's U(-1/sqrt(H), 1/sqrt(H)) init
    feat = embed
    for layer in range(num_layers):
        scope = f"/{kind.lower()}/l{layer}"
        w = g.uniform(f"onnx::{kind}_W_l{layer}", (2, gates * hidden, feat), -k, k)
        r = g.uniform(f"onnx::{kind}_R_l{layer}", (2, gates * hidden, hidden), -k, k)
        b = g.uniform(f"onnx::{kind}_B_l{layer}", (2, 2 * gates * hidden), -k, k)
        h0 = g.init("initial_h", np.zeros((2, batch, hidden), np.float32))
        inputs = [xt, w, r, b, "seq_lens", h0]
        attrs = dict(hidden_size=hidden, direction="bidirectional")
        if kind == "LSTM":
            inputs.append(g.init("initial_c", np.zeros((2, batch, hidden), np.float32)))
        else:
            attrs["linear_before_reset"] = 1
        last = layer == num_layers - 1
        outs = ["Y" if last else f"{scope}/{kind}_output_0", f"{scope}/{kind}_output_1"] + (
            [f"{scope}/{kind}_output_2"] if kind == "LSTM" else [])
        g.op(kind, inputs, scope=scope, outputs=outs, **attrs)
        if not last:  # the next layer reads Y [S, 2, B, H] as [S, B, 2H]: Transpose + Reshape, as torch writes it
            t = g.op("Transpose", [outs[0]], scope=scope, perm=[0, 2, 1, 3])
            xt = g.op("Reshape", [t, g.const([0, 0, -1])], scope=scope)
            feat = 2 * hidden
    y_h = outs[1]                                                                 # [2, B, H]
    fwd = g.op("Gather", [y_h, g.const(-2)], scope="/Gather", axis=0)
    bwd = g.op("Gather", [y_h, g.const(-1)], scope="/Gather", axis=0)
    cat = g.op("Concat", [fwd, bwd], scope="/Concat", axis=1)                     # [B, 2H]
    fc_w = g.normal("fc.weight", (classes, 2 * hidden), 1.0 / np.sqrt(2 * hidden))
    fc_b = g.normal("fc.bias", (classes,), 0.1)
    g.op("Gemm", [cat, fc_w, fc_b], scope="/fc", outputs=["logits"], alpha=1.0, beta=1.0, transB=1)
    model = g.model(f"{kind.lower()}_classifier",
                    [("input_ids", INT64, [batch, seq]), ("seq_lens", 6, [batch])],  # 6 = INT32
                    [("logits", FLOAT, [batch, classes]), ("Y", FLOAT, [seq, 2, batch, hidden])], opset=OPSET)
    rng = np.random.default_rng(seed + 1000)
    feeds = {"input_ids": rng.integers(0, vocab, (batch, seq)).astype(np.int64),
             "seq_lens": np.array(lengths, np.int32)}
    return model, feeds


def lstm_classifier(seed=0, batch=3, seq=12, vocab=50, embed=16, hidden=20, classes=5, lengths=(12, 7, 1),
                    num_layers=1):
    return _recurrent_classifier("LSTM", seed, batch, seq, vocab, embed, hidden, classes, lengths, num_layers)


def gru_classifier(seed=0, batch=3, seq=12, vocab=50, embed=16, hidden=20, classes=5, lengths=(12, 9, 4),
                   num_layers=1):
    return _recurrent_classifier("GRU", seed, batch, seq, vocab, embed, hidden, classes, lengths, num_layers)
