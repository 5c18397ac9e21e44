// CPU kernels of the recurrent ops RNN, GRU and LSTM (ops/rnn.h reads their attributes, ops/rnn.cpp has the
// shapes). Each (direction, batch entry) pair is an independent recurrence and runs as one task: it walks its
// sequence of sequence_lens[b] steps (all of X when sequence_lens is omitted) forwards, or backwards (step len-1 down
// to 0) for the reverse direction and the second direction of a bidirectional node, and writes each step's hidden
// state to Y at that step. Y is zero past an entry's length; Y_h and Y_c hold the state after the entry's last step
// (step len-1 going forwards, step 0 going backwards), and zeros for an entry of length 0 (as onnxruntime does).
// Math in double; tensors in the node's type (float16, bfloat16, float32, float64).
//
// One step, with xw = W x_t + Wb and rh = R h + Rb for every gate row (the loop all three ops share), then per op
// (clip bounds the input of every activation; defaults f = Sigmoid, g = h = Tanh, RNN's f = Tanh):
//   RNN:  h = f(xw + rh)
//   GRU:  z = f(xw_z + rh_z), r = f(xw_r + rh_r),
//         n = g(xw_h + R_h (r . h) + Rb_h), or with linear_before_reset g(xw_h + r . (R_h h + Rb_h)),
//         h = (1 - z) . n + z . h
//   LSTM: i = f(xw_i + rh_i + P_i . c), fg = f(xw_f + rh_f + P_f . c) (1 - i with input_forget),
//         c = fg . c + i . g(xw_c + rh_c), o = f(xw_o + rh_o + P_o . c) (the new c), h = o . h(c)
#include <vector>

#include "backends/cpu/common.h"
#include "backends/cpu/tensor_util.h"
#include "ops/rnn.h"

namespace kiln::cpu {
namespace {

// Element offsets of the rows of X, Y and the states (initial_h, initial_c, Y_h, Y_c) under either layout.
struct Geometry {
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, dirs = 1;
  bool batch_first = false;  // layout 1

  int64_t x(int64_t t, int64_t b) const { return (batch_first ? b * seq + t : t * batch + b) * input; }
  int64_t y(int64_t t, int64_t d, int64_t b) const {
    return (batch_first ? (b * seq + t) * dirs + d : (t * dirs + d) * batch + b) * hidden;
  }
  int64_t state(int64_t d, int64_t b) const { return (batch_first ? b * dirs + d : d * batch + b) * hidden; }
  std::vector<int64_t> y_shape() const {
    if (batch_first) return {batch, seq, dirs, hidden};
    return {seq, dirs, batch, hidden};
  }
  std::vector<int64_t> state_shape() const {
    if (batch_first) return {batch, dirs, hidden};
    return {dirs, batch, hidden};
  }
};

// One direction's parameters in double: W [gates*H, I], R [gates*H, H], the biases Wb and Rb [gates*H], LSTM's
// peepholes P [3*H] (i, o, f); zeros where the input is omitted.
struct Params {
  std::vector<double> w, r, wb, rb, p;
};

template <typename T>
std::vector<double> Read(const Tensor* t, int64_t offset, int64_t count) {
  std::vector<double> v(static_cast<size_t>(count), 0.0);
  if (!t) return v;
  const T* p = t->data<T>();
  for (int64_t i = 0; i < count; ++i) v[static_cast<size_t>(i)] = static_cast<double>(Load(p, offset + i));
  return v;
}

// The recurrence of one direction: Step advances the hidden state h (and LSTM's cell state c) by one input row.
class Cell {
 public:
  Cell(const RnnAttrs& a, const Params& p, int64_t direction, int64_t hidden, int64_t input)
      : a_(a), p_(p), d_(direction), hidden_(hidden), input_(input),
        xw_(static_cast<size_t>(a.gates * hidden)), rh_(xw_.size()), tmp_(static_cast<size_t>(2 * hidden)) {}

  void Step(const double* x, double* h, double* c) {
    const int64_t H = hidden_;
    MatVec(p_.w, input_, x, p_.wb, 0, a_.gates * H, xw_.data());
    // GRU's hidden gate without linear_before_reset multiplies R_h by r . h: its rows wait until r is known.
    const bool gru_late = a_.op == RnnOp::kGru && !a_.linear_before_reset;
    MatVec(p_.r, H, h, p_.rb, 0, gru_late ? 2 * H : a_.gates * H, rh_.data());
    const double* xw = xw_.data();
    const double* rh = rh_.data();
    const RnnActivation& f = a_.activation(d_, 0);
    switch (a_.op) {
      case RnnOp::kRnn:
        for (int64_t j = 0; j < H; ++j) h[j] = f(a_.Clip(xw[j] + rh[j]));
        break;
      case RnnOp::kGru: {
        const RnnActivation& g = a_.activation(d_, 1);
        double* z = tmp_.data();
        double* rr = tmp_.data() + H;  // r, then r . h
        for (int64_t j = 0; j < H; ++j) {
          z[j] = f(a_.Clip(xw[j] + rh[j]));
          rr[j] = f(a_.Clip(xw[H + j] + rh[H + j]));
        }
        if (gru_late) {
          for (int64_t j = 0; j < H; ++j) rr[j] *= h[j];
          MatVec(p_.r, H, rr, p_.rb, 2 * H, H, rh_.data());
        }
        for (int64_t j = 0; j < H; ++j) {
          const double pre = gru_late ? xw[2 * H + j] + rh[2 * H + j] : xw[2 * H + j] + rr[j] * rh[2 * H + j];
          const double n = g(a_.Clip(pre));
          h[j] = (1.0 - z[j]) * n + z[j] * h[j];
        }
        break;
      }
      case RnnOp::kLstm: {
        const RnnActivation& g = a_.activation(d_, 1);
        const RnnActivation& hf = a_.activation(d_, 2);
        const double* pi = p_.p.data();
        const double* po = pi + H;
        const double* pf = pi + 2 * H;
        for (int64_t j = 0; j < H; ++j) {
          const double c_prev = c[j];
          const double i = f(a_.Clip(xw[j] + rh[j] + pi[j] * c_prev));
          const double fg = a_.input_forget ? 1.0 - i : f(a_.Clip(xw[2 * H + j] + rh[2 * H + j] + pf[j] * c_prev));
          const double cand = g(a_.Clip(xw[3 * H + j] + rh[3 * H + j]));
          c[j] = fg * c_prev + i * cand;
          const double o = f(a_.Clip(xw[H + j] + rh[H + j] + po[j] * c[j]));
          h[j] = o * hf(c[j]);
        }
        break;
      }
    }
  }

 private:
  // out[j] = bias[j] + sum_k m[j, k] v[k] for rows j in [row0, row0 + rows) of a matrix with `cols` columns.
  static void MatVec(const std::vector<double>& m, int64_t cols, const double* v, const std::vector<double>& bias,
                     int64_t row0, int64_t rows, double* out) {
    for (int64_t j = row0; j < row0 + rows; ++j) {
      const double* row = m.data() + j * cols;
      double acc = bias[static_cast<size_t>(j)];
      for (int64_t k = 0; k < cols; ++k) acc += row[k] * v[k];
      out[j] = acc;
    }
  }

  const RnnAttrs& a_;
  const Params& p_;
  int64_t d_, hidden_, input_;
  std::vector<double> xw_, rh_, tmp_;
};

struct Io {
  const Tensor *x, *w, *r, *b, *h0, *c0, *p;
  Tensor *y, *yh, *yc;  // null where the output is not wanted
};

template <typename T>
void RunTyped(const RnnAttrs& a, const Geometry& geo, const Io& io, const std::vector<int64_t>& lens) {
  const int64_t G = a.gates, H = geo.hidden, I = geo.input;
  std::vector<Params> params(static_cast<size_t>(geo.dirs));
  for (int64_t d = 0; d < geo.dirs; ++d) {
    Params& p = params[static_cast<size_t>(d)];
    p.w = Read<T>(io.w, d * G * H * I, G * H * I);
    p.r = Read<T>(io.r, d * G * H * H, G * H * H);
    p.wb = Read<T>(io.b, d * 2 * G * H, G * H);
    p.rb = Read<T>(io.b, d * 2 * G * H + G * H, G * H);
    if (a.op == RnnOp::kLstm) p.p = Read<T>(io.p, d * 3 * H, 3 * H);
  }
  const T* x = io.x->data<T>();
  const T* h0 = io.h0 ? io.h0->data<T>() : nullptr;
  const T* c0 = io.c0 ? io.c0->data<T>() : nullptr;
  T* y = io.y ? io.y->data<T>() : nullptr;
  T* yh = io.yh ? io.yh->data<T>() : nullptr;
  T* yc = io.yc ? io.yc->data<T>() : nullptr;
  using C = ComputeT<T>;

  auto run = [&](int64_t begin, int64_t end) {
    std::vector<double> h(static_cast<size_t>(H)), c(static_cast<size_t>(H)), xt(static_cast<size_t>(I));
    for (int64_t task = begin; task < end; ++task) {
      const int64_t d = task / geo.batch, b = task % geo.batch;
      Cell cell(a, params[static_cast<size_t>(d)], d, H, I);
      const int64_t len = lens[static_cast<size_t>(b)], s0 = geo.state(d, b);
      for (int64_t j = 0; j < H; ++j) {
        h[static_cast<size_t>(j)] = h0 ? static_cast<double>(Load(h0, s0 + j)) : 0.0;
        c[static_cast<size_t>(j)] = c0 ? static_cast<double>(Load(c0, s0 + j)) : 0.0;
      }
      for (int64_t k = 0; k < len; ++k) {
        const int64_t t = a.backwards(d) ? len - 1 - k : k;
        for (int64_t i = 0; i < I; ++i) xt[static_cast<size_t>(i)] = static_cast<double>(Load(x, geo.x(t, b) + i));
        cell.Step(xt.data(), h.data(), c.data());
        if (y)
          for (int64_t j = 0; j < H; ++j) Store(y, geo.y(t, d, b) + j, static_cast<C>(h[static_cast<size_t>(j)]));
      }
      if (y)
        for (int64_t t = len; t < geo.seq; ++t)
          for (int64_t j = 0; j < H; ++j) Store(y, geo.y(t, d, b) + j, C(0));
      for (int64_t j = 0; j < H; ++j) {
        if (yh) Store(yh, s0 + j, static_cast<C>(len > 0 ? h[static_cast<size_t>(j)] : 0.0));
        if (yc) Store(yc, s0 + j, static_cast<C>(len > 0 ? c[static_cast<size_t>(j)] : 0.0));
      }
    }
  };
  const int64_t work = std::max<int64_t>(1, geo.seq * G * H * (I + H));
  ParallelFor(geo.dirs * geo.batch, run, std::max<int64_t>(1, (int64_t{1} << 16) / work));
}

Status RnnKernel(KernelContext& c) {
  const Node& n = c.node;
  KILN_ASSIGN_OR_RETURN(const RnnAttrs a, ReadRnnAttrs(n));
  Io io{c.input(0), c.input(1), c.input(2), c.input(3), c.input(5), nullptr, nullptr, nullptr, nullptr, nullptr};
  if (a.op == RnnOp::kLstm) {
    io.c0 = c.input(6);
    io.p = c.input(7);
  }
  if (!io.x || !io.w || !io.r) return Err(StatusCode::kInvalidArgument, "{}: X, W and R are required", n.Where());
  for (size_t i = a.max_inputs(); i < c.num_inputs(); ++i)
    if (c.input(i)) return Err(StatusCode::kInvalidArgument, "{}: {} takes {} inputs", n.Where(), n.op_type, a.max_inputs());
  if (io.x->rank() != 3 || io.r->rank() != 3)
    return Err(StatusCode::kInvalidArgument, "{}: X {} and R {} must be 3-D", n.Where(), io.x->Describe(),
               io.r->Describe());
  Geometry geo;
  geo.batch_first = a.layout == 1;
  geo.seq = io.x->dim(geo.batch_first ? 1 : 0);
  geo.batch = io.x->dim(geo.batch_first ? 0 : 1);
  geo.input = io.x->dim(2);
  geo.hidden = a.hidden_size > 0 ? a.hidden_size : io.r->dim(2);
  geo.dirs = a.num_directions;
  const int64_t G = a.gates, H = geo.hidden, D = geo.dirs;

  // Every input present must have exactly its shape, and the float ones X's element type.
  const std::vector<std::pair<const Tensor*, std::vector<int64_t>>> expected = {
      {io.w, {D, G * H, geo.input}}, {io.r, {D, G * H, H}},     {io.b, {D, 2 * G * H}},
      {io.h0, geo.state_shape()},    {io.c0, geo.state_shape()}, {io.p, {D, 3 * H}}};
  for (const auto& [t, shape] : expected) {
    if (!t) continue;
    if (t->shape() != shape || t->dtype() != io.x->dtype())
      return Err(StatusCode::kInvalidArgument, "{}: with X {}, an input is {} where {} of shape {} was expected",
                 n.Where(), io.x->Describe(), t->Describe(), DataTypeName(io.x->dtype()),
                 ShapeToString(shape));
  }
  std::vector<int64_t> lens(static_cast<size_t>(geo.batch), geo.seq);
  if (const Tensor* sl = c.input(4)) {
    if (sl->dtype() != DataType::kInt32 && sl->dtype() != DataType::kInt64)
      return Err(StatusCode::kInvalidArgument, "{}: sequence_lens must be int32, not {}", n.Where(), sl->Describe());
    if (sl->shape() != std::vector<int64_t>{geo.batch})
      return Err(StatusCode::kInvalidArgument, "{}: sequence_lens is {}, expected [{}] (batch_size)", n.Where(),
                 sl->Describe(), geo.batch);
    for (int64_t b = 0; b < geo.batch; ++b) {
      lens[static_cast<size_t>(b)] = sl->GetAsInt(b);
      if (lens[static_cast<size_t>(b)] < 0 || lens[static_cast<size_t>(b)] > geo.seq)
        return Err(StatusCode::kInvalidArgument, "{}: sequence_lens[{}] is {}, outside [0, seq_length = {}]",
                   n.Where(), b, lens[static_cast<size_t>(b)], geo.seq);
    }
  }

  const DataType dt = io.x->dtype();
  if (WantOutput(c, 0)) io.y = &AllocOutput(c, 0, dt, geo.y_shape());
  if (WantOutput(c, 1)) io.yh = &AllocOutput(c, 1, dt, geo.state_shape());
  if (a.op == RnnOp::kLstm && WantOutput(c, 2)) io.yc = &AllocOutput(c, 2, dt, geo.state_shape());
  return DispatchFloat(dt, n, [&]<typename T>() { RunTyped<T>(a, geo, io, lens); });
}

}  // namespace

void RegisterRnnKernels(KernelRegistry& r) {
  r.Add("RNN", RnnKernel);
  r.Add("GRU", RnnKernel);
  r.Add("LSTM", RnnKernel);
}

}  // namespace kiln::cpu
