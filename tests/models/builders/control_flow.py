"""Models with ONNX control flow (If, Loop, Scan), written with onnx.helper the way exporters lay them out.

- greedy_decode: a greedy decoding loop (Loop with a trip count and an early-stop condition) whose body embeds the
  last token, runs a recurrent cell, picks the next token with ArgMax, and holds an If whose branches read values of
  the body and of the top-level graph (nested outer-scope reads). Outputs: the final state and token, and the tokens
  and logits of every step (scan outputs).
- scan_rnn: a Scan over a [batch, seq, d] input (axis 1) and a reversed second input, with a recurrent state, a
  captured weight, and scan outputs stacked on axis 1 and reversed.
- branches: a top-level If on an input condition (both branches run across the test's feeds) next to an If whose
  condition is a constant (kiln inlines the branch it takes).
- sequence_loop: sequences the way exported RNN and decoder code uses them: SplitToSequence cuts the input into
  steps, a Loop (its trip count from SequenceLength, optionally ended early by its condition) reads one step with
  SequenceAt, runs a recurrent cell and appends the new state to a loop-carried sequence (SequenceEmpty, then
  SequenceInsert); ConcatFromSequence joins the states after the loop, and SplitToSequence -> SequenceAt (a negative
  position too) and a stacking ConcatFromSequence (new_axis=1) read sequences outside it.
- counted_loop: a for loop (a constant trip count, no condition, or with const_cond a constant true condition the
  body passes through, as exporters write it) whose body reads the iteration number, a captured weight and a graph
  input, with a scan output: the form a CUDA engine runs without the host (graphs capture it).
- while_loop: a loop ended by its body's condition (states only, one of them an int64 counter): the host reads the
  condition every iteration.
- gated_branches: an If whose condition is computed from the input (both branches give the same shape), holding a
  nested If in one branch; `sign` picks which branch the feeds take.
"""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


def _init(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def _model(graph):
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def greedy_decode(seed=0, batch=2, hidden=16, vocab=24, steps=6, stop_after=4):
    rng = np.random.default_rng(seed)
    f = np.float32
    emb = (rng.standard_normal((vocab, hidden)) * 0.5).astype(f)
    w = (rng.standard_normal((hidden, hidden)) / np.sqrt(hidden)).astype(f)
    u = (rng.standard_normal((hidden, vocab)) / np.sqrt(hidden)).astype(f)

    # The If inside the body: even steps keep the new state, odd steps blend it with W's first row (reads `h_new` of
    # the body and `W` of the top-level graph).
    then_g = helper.make_graph([helper.make_node("Identity", ["h_new"], ["h_then"])], "keep", [],
                               [helper.make_tensor_value_info("h_then", TensorProto.FLOAT, [batch, hidden])])
    else_g = helper.make_graph([
        helper.make_node("Gather", ["W", "zero_idx"], ["w_row"], axis=0),
        helper.make_node("Mul", ["h_new", "half"], ["h_half"]),
        helper.make_node("Add", ["h_half", "w_row"], ["h_else"]),
    ], "blend", [], [helper.make_tensor_value_info("h_else", TensorProto.FLOAT, [batch, hidden])],
        initializer=[_init("zero_idx", np.array(0, np.int64)), _init("half", np.array(0.5, f))])

    body = helper.make_graph([
        helper.make_node("Gather", ["E", "tok_in"], ["e"], axis=0),
        helper.make_node("Add", ["e", "h_in"], ["eh"]),
        helper.make_node("MatMul", ["eh", "W"], ["pre"]),
        helper.make_node("Tanh", ["pre"], ["h_new"]),
        helper.make_node("MatMul", ["h_new", "U"], ["logits"]),
        helper.make_node("ArgMax", ["logits"], ["tok_out"], axis=-1, keepdims=0),
        helper.make_node("Mod", ["iter", "two"], ["parity"]),
        helper.make_node("Equal", ["parity", "zero"], ["even"]),
        helper.make_node("If", ["even"], ["h_out"], then_branch=then_g, else_branch=else_g),
        helper.make_node("Add", ["iter", "one"], ["done_steps"]),
        helper.make_node("Less", ["done_steps", "stop_after"], ["cond_out"]),
        helper.make_node("Identity", ["tok_out"], ["tok_scan"]),
    ], "step", [
        helper.make_tensor_value_info("iter", TensorProto.INT64, []),
        helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
        helper.make_tensor_value_info("tok_in", TensorProto.INT64, [batch]),
        helper.make_tensor_value_info("h_in", TensorProto.FLOAT, [batch, hidden]),
    ], [
        helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
        helper.make_tensor_value_info("tok_out", TensorProto.INT64, [batch]),
        helper.make_tensor_value_info("h_out", TensorProto.FLOAT, [batch, hidden]),
        helper.make_tensor_value_info("tok_scan", TensorProto.INT64, [batch]),
        helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, vocab]),
    ], initializer=[_init("two", np.array(2, np.int64)), _init("zero", np.array(0, np.int64)),
                    _init("one", np.array(1, np.int64))])

    graph = helper.make_graph(
        [helper.make_node("Loop", ["max_steps", "keep_going", "start", "h0"],
                          ["tok_final", "h_final", "tokens", "all_logits"], body=body)],
        "greedy_decode",
        [helper.make_tensor_value_info("start", TensorProto.INT64, [batch]),
         helper.make_tensor_value_info("h0", TensorProto.FLOAT, [batch, hidden]),
         helper.make_tensor_value_info("keep_going", TensorProto.BOOL, []),
         helper.make_tensor_value_info("stop_after", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("tok_final", TensorProto.INT64, [batch]),
         helper.make_tensor_value_info("h_final", TensorProto.FLOAT, [batch, hidden]),
         helper.make_tensor_value_info("tokens", TensorProto.INT64, ["steps", batch]),
         helper.make_tensor_value_info("all_logits", TensorProto.FLOAT, ["steps", batch, vocab])],
        initializer=[_init("E", emb), _init("W", w), _init("U", u), _init("max_steps", np.array(steps, np.int64))])
    feeds = {"start": rng.integers(0, vocab, batch).astype(np.int64),
             "h0": rng.standard_normal((batch, hidden)).astype(f),
             "keep_going": np.array(True), "stop_after": np.array(stop_after, np.int64)}
    return _model(graph), feeds


def scan_rnn(seed=0, batch=2, seq=5, d=8):
    rng = np.random.default_rng(seed)
    f = np.float32
    wx = (rng.standard_normal((d, d)) / np.sqrt(d)).astype(f)
    body = helper.make_graph([
        helper.make_node("MatMul", ["x_t", "Wx"], ["xw"]),
        helper.make_node("Add", ["xw", "s_in"], ["a"]),
        helper.make_node("Add", ["a", "r_t"], ["b"]),
        helper.make_node("Tanh", ["b"], ["s_out"]),
        helper.make_node("Mul", ["s_out", "two"], ["y_t"]),
        helper.make_node("ReduceSum", ["s_out", "axes1"], ["sum_t"], keepdims=0),
    ], "cell", [
        helper.make_tensor_value_info("s_in", TensorProto.FLOAT, [batch, d]),
        helper.make_tensor_value_info("x_t", TensorProto.FLOAT, [batch, d]),
        helper.make_tensor_value_info("r_t", TensorProto.FLOAT, [batch, d]),
    ], [
        helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [batch, d]),
        helper.make_tensor_value_info("y_t", TensorProto.FLOAT, [batch, d]),
        helper.make_tensor_value_info("sum_t", TensorProto.FLOAT, [batch]),
    ], initializer=[_init("two", np.array(2, f)), _init("axes1", np.array([1], np.int64))])
    graph = helper.make_graph(
        [helper.make_node("Scan", ["s0", "x", "r"], ["s_final", "ys", "sums"], body=body, num_scan_inputs=2,
                          scan_input_axes=[1, 1], scan_input_directions=[0, 1], scan_output_axes=[1, 0],
                          scan_output_directions=[0, 1])],
        "scan_rnn",
        [helper.make_tensor_value_info("s0", TensorProto.FLOAT, [batch, d]),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, seq, d]),
         helper.make_tensor_value_info("r", TensorProto.FLOAT, [batch, seq, d])],
        [helper.make_tensor_value_info("s_final", TensorProto.FLOAT, [batch, d]),
         helper.make_tensor_value_info("ys", TensorProto.FLOAT, [batch, seq, d]),
         helper.make_tensor_value_info("sums", TensorProto.FLOAT, [seq, batch])],
        initializer=[_init("Wx", wx)])
    feeds = {"s0": rng.standard_normal((batch, d)).astype(f), "x": rng.standard_normal((batch, seq, d)).astype(f),
             "r": (rng.standard_normal((batch, seq, d)) * 0.1).astype(f)}
    return _model(graph), feeds


def branches(seed=0, n=6, flag=True):
    rng = np.random.default_rng(seed)
    f = np.float32
    then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["t_out"]),
                                helper.make_node("Concat", ["t_out", "x"], ["t_cat"], axis=0)], "then", [],
                               [helper.make_tensor_value_info("t_cat", TensorProto.FLOAT, [2 * n])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e_out"])], "else", [],
                               [helper.make_tensor_value_info("e_out", TensorProto.FLOAT, [n])])
    c_then = helper.make_graph([helper.make_node("Mul", ["x", "x"], ["sq"])], "c_then", [],
                               [helper.make_tensor_value_info("sq", TensorProto.FLOAT, [n])])
    c_else = helper.make_graph([helper.make_node("Sigmoid", ["x"], ["sg"])], "c_else", [],
                               [helper.make_tensor_value_info("sg", TensorProto.FLOAT, [n])])
    graph = helper.make_graph(
        [helper.make_node("If", ["flag"], ["picked"], then_branch=then_g, else_branch=else_g),
         helper.make_node("If", ["const_flag"], ["folded"], then_branch=c_then, else_branch=c_else)],
        "branches",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n]),
         helper.make_tensor_value_info("flag", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("picked", TensorProto.FLOAT, ["m"]),
         helper.make_tensor_value_info("folded", TensorProto.FLOAT, [n])],
        initializer=[_init("const_flag", np.array(False))])
    feeds = {"x": rng.standard_normal(n).astype(f), "flag": np.array(flag)}
    return _model(graph), feeds


def sequence_loop(seed=0, batch=2, steps=5, d=8, stop_after=None):
    """stop_after: the Loop's condition ends it after that many steps (the states collected so far are concatenated);
    None: it runs every step, with no condition input."""
    rng = np.random.default_rng(seed)
    f = np.float32
    w = (rng.standard_normal((d, d)) / np.sqrt(d)).astype(f)
    u = (rng.standard_normal((d, d)) / np.sqrt(d)).astype(f)
    body_nodes = [
        helper.make_node("SequenceAt", ["xs", "i"], ["x_t"]),
        helper.make_node("MatMul", ["x_t", "W"], ["xw"]),
        helper.make_node("MatMul", ["h_in", "U"], ["hu"]),
        helper.make_node("Add", ["xw", "hu"], ["pre"]),
        helper.make_node("Tanh", ["pre"], ["h_out"]),
        helper.make_node("Unsqueeze", ["h_out", "axis1"], ["h_step"]),
        helper.make_node("SequenceInsert", ["hs_in", "h_step"], ["hs_out"]),
    ]
    if stop_after is None:
        body_nodes.append(helper.make_node("Identity", ["cond_in"], ["cond_out"]))
    else:
        body_nodes += [helper.make_node("Add", ["i", "one"], ["done"]),
                       helper.make_node("Less", ["done", "stop_after"], ["cond_out"])]
    body = helper.make_graph(body_nodes, "cell", [
        helper.make_tensor_value_info("i", TensorProto.INT64, []),
        helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
        helper.make_tensor_value_info("h_in", TensorProto.FLOAT, [batch, d]),
        helper.make_tensor_sequence_value_info("hs_in", TensorProto.FLOAT, None),
    ], [
        helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
        helper.make_tensor_value_info("h_out", TensorProto.FLOAT, [batch, d]),
        helper.make_tensor_sequence_value_info("hs_out", TensorProto.FLOAT, None),
    ], initializer=[_init("axis1", np.array([1], np.int64))] + ([] if stop_after is None else [
        _init("one", np.array(1, np.int64))]))
    loop_cond = "" if stop_after is None else "keep_going"
    graph = helper.make_graph([
        helper.make_node("SplitToSequence", ["x"], ["xs"], axis=1, keepdims=0),
        helper.make_node("SequenceLength", ["xs"], ["n_steps"]),
        helper.make_node("SequenceEmpty", [], ["hs0"], dtype=TensorProto.FLOAT),
        helper.make_node("Loop", ["n_steps", loop_cond, "h0", "hs0"], ["h_final", "hs"], body=body),
        helper.make_node("ConcatFromSequence", ["hs"], ["ys"], axis=1),
        # Outside the loop: the first two states and the rest, the last input step, the steps stacked again.
        helper.make_node("SplitToSequence", ["ys", "split"], ["parts"], axis=1),
        helper.make_node("SequenceAt", ["parts", "one"], ["tail"]),
        helper.make_node("SequenceAt", ["xs", "minus_one"], ["x_last"]),
        helper.make_node("ConcatFromSequence", ["xs"], ["x_stacked"], axis=-1, new_axis=1),
    ], "sequence_loop", [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, steps, d]),
        helper.make_tensor_value_info("h0", TensorProto.FLOAT, [batch, d]),
    ] + ([] if stop_after is None else [helper.make_tensor_value_info("keep_going", TensorProto.BOOL, [])]), [
        helper.make_tensor_value_info("h_final", TensorProto.FLOAT, [batch, d]),
        helper.make_tensor_value_info("ys", TensorProto.FLOAT, [batch, None, d]),
        helper.make_tensor_value_info("tail", TensorProto.FLOAT, [batch, None, d]),
        helper.make_tensor_value_info("x_last", TensorProto.FLOAT, [batch, d]),
        helper.make_tensor_value_info("x_stacked", TensorProto.FLOAT, [batch, d, steps]),
    ], initializer=[_init("W", w), _init("U", u), _init("one", np.array(1, np.int64)),
                    _init("minus_one", np.array(-1, np.int64)),
                    _init("split", np.array([2, (stop_after or steps) - 2], np.int64))])
    if stop_after is not None:
        graph.initializer.append(_init("stop_after", np.array(stop_after, np.int64)))
    feeds = {"x": rng.standard_normal((batch, steps, d)).astype(f), "h0": rng.standard_normal((batch, d)).astype(f)}
    if stop_after is not None:
        feeds["keep_going"] = np.array(True)
    return _model(graph), feeds


def sequence_loop_reference(model_feeds, seed=0, batch=2, steps=5, d=8, stop_after=None):
    """The outputs of sequence_loop computed with numpy (the same weights: the builder's generator, replayed)."""
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((d, d)) / np.sqrt(d)).astype(np.float32)
    u = (rng.standard_normal((d, d)) / np.sqrt(d)).astype(np.float32)
    x, h = model_feeds["x"], model_feeds["h0"]
    hs = []
    for t in range(stop_after or steps):
        h = np.tanh(x[:, t] @ w + h @ u)
        hs.append(h[:, None])
    ys = np.concatenate(hs, axis=1)
    return {"h_final": h, "ys": ys, "tail": ys[:, 2:], "x_last": x[:, -1],
            "x_stacked": np.stack([x[:, t] for t in range(steps)], axis=-1)}


def counted_loop(seed=0, batch=2, d=8, trips=5, const_cond=False):
    rng = np.random.default_rng(seed)
    f = np.float32
    w = (rng.standard_normal((d, d)) / np.sqrt(d)).astype(f)
    body = helper.make_graph([
        helper.make_node("Cast", ["iter"], ["it_f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["x", "it_f"], ["xi"]),
        helper.make_node("MatMul", ["h_in", "W"], ["hw"]),
        helper.make_node("Add", ["hw", "xi"], ["pre"]),
        helper.make_node("Tanh", ["pre"], ["h_out"]),
        helper.make_node("ReduceMean", ["h_out"], ["m_t"], axes=[1], keepdims=0),
        helper.make_node("Identity", ["cond_in"], ["cond_out"]),
    ], "step", [
        helper.make_tensor_value_info("iter", TensorProto.INT64, []),
        helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
        helper.make_tensor_value_info("h_in", TensorProto.FLOAT, [batch, d]),
    ], [
        helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
        helper.make_tensor_value_info("h_out", TensorProto.FLOAT, [batch, d]),
        helper.make_tensor_value_info("m_t", TensorProto.FLOAT, [batch]),
    ])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["trips", "go" if const_cond else "", "h0"], ["h_final", "means"], body=body)],
        "counted_loop",
        [helper.make_tensor_value_info("h0", TensorProto.FLOAT, [batch, d]),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, d])],
        [helper.make_tensor_value_info("h_final", TensorProto.FLOAT, [batch, d]),
         helper.make_tensor_value_info("means", TensorProto.FLOAT, [trips, batch])],
        initializer=[_init("W", w), _init("trips", np.array(trips, np.int64))]
        + ([_init("go", np.array(True))] if const_cond else []))
    feeds = {"h0": rng.standard_normal((batch, d)).astype(f), "x": (rng.standard_normal((batch, d)) * 0.3).astype(f)}
    return _model(graph), feeds


def while_loop(seed=0, batch=2, d=8, limit=20.0):
    rng = np.random.default_rng(seed)
    f = np.float32
    body = helper.make_graph([
        helper.make_node("Mul", ["h_in", "growth"], ["hg"]),
        helper.make_node("Add", ["hg", "step"], ["h_out"]),
        helper.make_node("Add", ["count_in", "one"], ["count_out"]),
        helper.make_node("Abs", ["h_out"], ["habs"]),
        helper.make_node("ReduceMax", ["habs"], ["hmax"], keepdims=0),
        helper.make_node("Less", ["hmax", "limit"], ["cond_out"]),
    ], "step", [
        helper.make_tensor_value_info("iter", TensorProto.INT64, []),
        helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
        helper.make_tensor_value_info("h_in", TensorProto.FLOAT, [batch, d]),
        helper.make_tensor_value_info("count_in", TensorProto.INT64, []),
    ], [
        helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
        helper.make_tensor_value_info("h_out", TensorProto.FLOAT, [batch, d]),
        helper.make_tensor_value_info("count_out", TensorProto.INT64, []),
    ], initializer=[_init("growth", np.array(1.5, f)), _init("one", np.array(1, np.int64)),
                    _init("limit", np.array(limit, f))])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["max_trips", "go", "h0", "zero"], ["h_final", "count"], body=body)],
        "while_loop",
        [helper.make_tensor_value_info("h0", TensorProto.FLOAT, [batch, d]),
         helper.make_tensor_value_info("step", TensorProto.FLOAT, [batch, d]),
         helper.make_tensor_value_info("go", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("h_final", TensorProto.FLOAT, [batch, d]),
         helper.make_tensor_value_info("count", TensorProto.INT64, [])],
        initializer=[_init("max_trips", np.array(50, np.int64)), _init("zero", np.array(0, np.int64))])
    feeds = {"h0": rng.standard_normal((batch, d)).astype(f), "step": (rng.random((batch, d)) * 0.5).astype(f),
             "go": np.array(True)}
    return _model(graph), feeds


def gated_branches(seed=0, batch=2, n=6, sign=1.0):
    rng = np.random.default_rng(seed)
    f = np.float32
    w = (rng.standard_normal((n, n)) / np.sqrt(n)).astype(f)
    inner_then = helper.make_graph([helper.make_node("Mul", ["r", "two"], ["it_out"])], "inner_then", [],
                                   [helper.make_tensor_value_info("it_out", TensorProto.FLOAT, [batch, n])],
                                   initializer=[_init("two", np.array(2, f))])
    inner_else = helper.make_graph([helper.make_node("Identity", ["r"], ["ie_out"])], "inner_else", [],
                                   [helper.make_tensor_value_info("ie_out", TensorProto.FLOAT, [batch, n])])
    then_g = helper.make_graph([
        helper.make_node("MatMul", ["x", "W"], ["xw"]),
        helper.make_node("Relu", ["xw"], ["r"]),
        helper.make_node("ReduceMax", ["r"], ["rmax"], keepdims=0),
        helper.make_node("Greater", ["rmax", "one"], ["big"]),
        helper.make_node("If", ["big"], ["t_out"], then_branch=inner_then, else_branch=inner_else),
    ], "then", [], [helper.make_tensor_value_info("t_out", TensorProto.FLOAT, [batch, n])],
        initializer=[_init("one", np.array(1, f))])
    else_g = helper.make_graph([helper.make_node("Sigmoid", ["x"], ["sg"]),
                                helper.make_node("Add", ["sg", "x"], ["e_out"])], "else", [],
                               [helper.make_tensor_value_info("e_out", TensorProto.FLOAT, [batch, n])])
    graph = helper.make_graph(
        [helper.make_node("ReduceSum", ["x"], ["total"], keepdims=0),
         helper.make_node("Greater", ["total", "zero"], ["positive"]),
         helper.make_node("If", ["positive"], ["y"], then_branch=then_g, else_branch=else_g)],
        "gated_branches",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, n])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, n])],
        initializer=[_init("W", w), _init("zero", np.array(0, f))])
    x = rng.standard_normal((batch, n)).astype(f)
    x = (np.abs(x) * sign).astype(f)
    return _model(graph), {"x": x}
