// INT8 calibration: the |x| histogram keeps every value as its range grows; minmax, percentile and entropy pick
// the thresholds they should on distributions whose answer is known; the calibration cache reads TensorRT's files
// and round-trips its own byte for byte, and every malformed line is an error naming the line; CalibrateNetwork
// runs a network over batches and reports every float tensor.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "kiln/builder.h"
#include "kiln/calibrator.h"
#include "ir/graph.h"
#include "quant/calibration_algos.h"
#include "quant/insert_qdq.h"
#include "quant/tensor_range.h"

namespace kiln {
namespace {

using quant::TensorRange;

int64_t Sum(const std::vector<int64_t>& h) {
  int64_t s = 0;
  for (int64_t c : h) s += c;
  return s;
}

TEST(TensorRange, GrowingKeepsEveryValue) {
  TensorRange r;
  std::mt19937 rng(3);
  std::normal_distribution<float> n(0.f, 1.f);
  int64_t total = 0;
  for (float scale : {0.01f, 1.f, 0.5f, 37.f, 2.f}) {  // the range grows twice, by factors over 2
    std::vector<float> v(1000);
    for (auto& x : v) x = scale * n(rng);
    r.AddValues(v.data(), static_cast<int64_t>(v.size()));
    total += 1000;
    EXPECT_EQ(Sum(r.histogram()), total);
    EXPECT_GE(r.range(), r.amax());
  }
  EXPECT_EQ(r.count(), total);
  EXPECT_LT(r.min(), 0.f);
  EXPECT_GT(r.max(), 0.f);
  EXPECT_FLOAT_EQ(r.amax(), std::max(-r.min(), r.max()));
}

TEST(TensorRange, NanIsCountedApartAndInfinityClamps) {
  TensorRange r;
  const float v[] = {1.f, -2.f, NAN, INFINITY, 0.5f};
  r.AddValues(v, 5);
  EXPECT_EQ(r.nan_count(), 1);
  EXPECT_EQ(r.count(), 4);
  EXPECT_FLOAT_EQ(r.amax(), 2.f);
  EXPECT_EQ(r.histogram().back(), 2);  // -2 and the clamped infinity sit in the top bin
}

TEST(TensorRange, AllZerosThenValues) {
  TensorRange r;
  std::vector<float> z(100, 0.f);
  r.AddValues(z.data(), 100);
  EXPECT_EQ(r.range(), 0);
  EXPECT_EQ(quant::EntropyThreshold(r), 0);
  const float v[] = {4.f};
  r.AddValues(v, 1);
  EXPECT_EQ(r.histogram()[0], 100);
  EXPECT_FLOAT_EQ(quant::MinMaxThreshold(r), 4.f);
}

TEST(CalibrationAlgos, PercentileOfUniform) {
  TensorRange r;
  std::vector<float> v(200000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) / v.size();  // uniform on [0, 1)
  r.AddValues(v.data(), static_cast<int64_t>(v.size()));
  EXPECT_NEAR(quant::PercentileThreshold(r, 99.0), 0.99, 2 * r.bin_width());
  EXPECT_NEAR(quant::PercentileThreshold(r, 50.0), 0.5, 2 * r.bin_width());
  EXPECT_FLOAT_EQ(static_cast<float>(quant::PercentileThreshold(r, 100.0)), r.amax());
}

TEST(CalibrationAlgos, EntropyClipsRareOutliers) {
  TensorRange r;
  std::mt19937 rng(7);
  std::normal_distribution<float> n(0.f, 1.f);
  std::vector<float> v(400000);
  for (auto& x : v) x = n(rng);
  for (int i = 0; i < 20; ++i) v[i] = 60.f;  // 0.005% outliers far out
  r.AddValues(v.data(), static_cast<int64_t>(v.size()));
  const double t = quant::EntropyThreshold(r);
  // The threshold sits in the Gaussian's tail, far below the outliers.
  EXPECT_GT(t, 2.5);
  EXPECT_LT(t, 10.0);
  EXPECT_FLOAT_EQ(static_cast<float>(quant::MinMaxThreshold(r)), 60.f);
}

TEST(CalibrationAlgos, EntropyKeepsFewLevelsWhole) {
  // Values on at most 128 of the bins are representable as they are: no clipping.
  TensorRange r;
  std::vector<float> v;
  for (int i = 0; i < 1000; ++i) v.push_back(static_cast<float>(i % 5));
  r.AddValues(v.data(), static_cast<int64_t>(v.size()));
  EXPECT_FLOAT_EQ(static_cast<float>(quant::EntropyThreshold(r)), 4.f);
}

TEST(CalibrationCache, ReadsTensorRTsFile) {
  const std::string text =
      "TRT-7000-EntropyCalibration2\ndata: 3c008912\nconv1: 3c88edfc\nprob: 3c010a14\n(Unnamed ITensor* 38): 3c3604b4\n";
  auto t = ParseCalibrationCache(text.data(), text.size(), "mnist.cache");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->algorithm, CalibrationAlgoType::kENTROPY_CALIBRATION_2);
  EXPECT_EQ(t->version, "7000");
  ASSERT_EQ(t->scales.size(), 4u);
  EXPECT_EQ(t->scales[0].first, "data");
  EXPECT_NEAR(t->scales[0].second * 127, 0.99634, 1e-5);  // MNIST pixels in [0, 1]
  EXPECT_EQ(t->scales[3].first, "(Unnamed ITensor* 38)");
  // Written back, the same bytes.
  EXPECT_EQ(WriteCalibrationCache(*t), text);
}

TEST(CalibrationCache, RoundTripIsByteIdentical) {
  CalibrationTable t;
  t.algorithm = CalibrationAlgoType::kMINMAX_CALIBRATION;
  t.scales = {{"x:0", 0.125f}, {"a: b", 1e-8f}, {"zero", 0.f}};
  const std::string text = WriteCalibrationCache(t);
  EXPECT_EQ(text.substr(0, text.find('\n')), "TRT-8601-MinMaxCalibration");
  auto back = ParseCalibrationCache(text.data(), text.size(), "c");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->scales.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(back->scales[i].first, t.scales[i].first);
    EXPECT_EQ(std::memcmp(&back->scales[i].second, &t.scales[i].second, 4), 0);
  }
  EXPECT_EQ(WriteCalibrationCache(*back), text);
}

TEST(CalibrationCache, MalformedLinesAreNamed) {
  struct Case {
    std::string text, expect;
  } cases[] = {
      {"", "empty"},
      {"hello\n", ":1: the header 'hello'"},
      {"TRT--EntropyCalibration2\n", ":1:"},
      {"TRT-8a01-EntropyCalibration2\n", "version '8a01'"},
      {"TRT-8601-Magic\n", "unknown calibration algorithm 'Magic'"},
      {"TRT-8601-EntropyCalibration2\nx 3c010a14\n", "c:2: 'x 3c010a14' is not"},
      {"TRT-8601-EntropyCalibration2\nx: 3g010a14\n", "c:2: tensor 'x': the scale '3g010a14'"},
      {"TRT-8601-EntropyCalibration2\nx: 3c010a1400\n", "c:2:"},
      {"TRT-8601-EntropyCalibration2\nx: \n", "c:2:"},
      {"TRT-8601-EntropyCalibration2\nx: 7fc00000\n", "c:2: tensor 'x': the scale nan"},
      {"TRT-8601-EntropyCalibration2\nx: bf800000\n", "c:2: tensor 'x': the scale -1"},
      {"TRT-8601-EntropyCalibration2\nx: 3c010a14\ny: 1\nx: 3c010a14\n", "c:4: tensor 'x' is listed a second time"},
      {std::string("TRT-8601-EntropyCalibration2\nx\0: 1\n", 35), "c:2: a NUL byte"},
  };
  for (const auto& c : cases) {
    auto t = ParseCalibrationCache(c.text.data(), c.text.size(), "c");
    ASSERT_FALSE(t.ok()) << c.text;
    EXPECT_NE(t.status().message().find(c.expect), std::string::npos) << t.status().message() << "\nwanted: " << c.expect;
  }
  auto missing = ReadCalibrationCacheFile("/nonexistent/kiln.cache");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/kiln.cache"), std::string::npos);
}

TEST(CalibrateNetwork, SeesEveryFloatTensorOfEveryBatch) {
  NetworkDefinition net;
  ASSERT_TRUE(net.addInput("x", DataType::kFloat32, {2, 3}).ok());
  const float w[] = {1, -1, 2, 0.5f, -3, 1};
  ASSERT_TRUE(net.addConstant("W", DataType::kFloat32, {3, 2}, w).ok());
  ASSERT_TRUE(net.addOp("MatMul", "mm", {"x", "W"}, {"h"}).ok());
  ASSERT_TRUE(net.addOp("Relu", "relu", {"h"}, {"y"}).ok());
  ASSERT_TRUE(net.addOp("Shape", "shape", {"y"}, {"s"}).ok());
  ASSERT_TRUE(net.markOutput("y").ok());
  ASSERT_TRUE(net.markOutput("s").ok());
  int batch = 0;
  float largest_x = 0;
  auto next = [&](std::map<std::string, Tensor>& b) -> Result<bool> {
    if (batch == 3) return false;
    Tensor x(DataType::kFloat32, {2, 3});
    for (int i = 0; i < 6; ++i) x.data<float>()[i] = static_cast<float>((i + 1) * (batch + 1)) * (i % 2 ? -1 : 1);
    for (int i = 0; i < 6; ++i) largest_x = std::max(largest_x, std::fabs(x.data<float>()[i]));
    b["x"] = x;
    ++batch;
    return true;
  };
  CalibrationOptions o;
  o.algorithm = CalibrationAlgoType::kMINMAX_CALIBRATION;
  o.backend = "cpu";
  int progress = 0;
  o.on_batch = [&](int) { ++progress; };
  auto r = CalibrateNetwork(net, o, next);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->batches, 3);
  EXPECT_EQ(progress, 3);
  ASSERT_EQ(r->tensors.size(), 3u);  // x, h, y: the int64 shape is not calibrated
  EXPECT_EQ(r->tensors[0].name, "x");
  EXPECT_EQ(r->tensors[1].name, "h");
  EXPECT_EQ(r->tensors[2].name, "y");
  EXPECT_FLOAT_EQ(r->tensors[0].amax, largest_x);
  EXPECT_FLOAT_EQ(r->tensors[0].scale, largest_x / 127.f);
  EXPECT_EQ(r->tensors[0].count, 18);
  EXPECT_GE(r->tensors[2].min, 0.f);  // after the Relu

  batch = 0;
  o.max_batches = 2;
  auto two = CalibrateNetwork(net, o, next);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->batches, 2);

  batch = 3;  // no batch at all
  auto none = CalibrateNetwork(net, o, next);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no batch"), std::string::npos);

  o.algorithm = CalibrationAlgoType::kLEGACY_CALIBRATION;
  batch = 0;
  auto legacy = CalibrateNetwork(net, o, next);
  ASSERT_FALSE(legacy.ok());
  EXPECT_NE(legacy.status().message().find("read from caches only"), std::string::npos);
}

// Implicit INT8's residual quantization (quant/insert_qdq.h) on a dynamic batch: the Add's operands have the same
// symbolic batch, so the shortcut is read through the same Q/DQ pair as the convolution's input; an Add whose
// shortcut has another shape (broadcast) is left alone.
TEST(InsertQdq, ResidualShortcutWithADynamicBatch) {
  Graph g;
  auto value = [&](const std::string& name, Shape shape) {
    Value* v = g.AddValue(name);
    v->dtype = DataType::kFloat32;
    v->shape = std::move(shape);
    v->has_shape = true;
    return v;
  };
  auto node = [&](const std::string& op, const std::string& name, std::vector<Value*> in, Value* out) {
    Node* n = g.AddNode(op, name);
    n->opset = 17;
    n->inputs = std::move(in);
    n->outputs = {out};
    out->producer = n;
    return n;
  };
  const Shape act = {Dim::Symbol("N"), Dim(4), Dim(5), Dim(5)};
  Value* x = value("x", act);
  x->is_graph_input = true;
  g.inputs.push_back(x);
  Value* w = g.AddConstant("w", Tensor(DataType::kFloat32, {4, 4, 1, 1}));
  Value* c = value("c", act);
  node("Conv", "conv", {x, w}, c);
  Value* y = value("y", act);
  node("Add", "add", {c, x}, y);
  Value* bias = value("bias", {Dim(4), Dim(1), Dim(1)});
  bias->is_graph_input = true;
  g.inputs.push_back(bias);
  Value* z = value("z", act);
  node("Add", "add_broadcast", {c, bias}, z);
  g.outputs = {y, z};
  const quant::QdqReport r = quant::InsertActivationQdq(g, {{"x", 0.01f}, {"bias", 0.02f}});
  EXPECT_EQ(r.tensors_quantized, 1);
  EXPECT_EQ(r.residuals_quantized, 1);
  const Node* add = nullptr;
  const Node* conv = nullptr;
  for (const auto& n : g.nodes()) {
    if (n->name == "add") add = n.get();
    if (n->name == "conv") conv = n.get();
  }
  ASSERT_TRUE(add && conv);
  EXPECT_EQ(add->input(1), conv->input(0)) << "the shortcut reads the convolution input's Q/DQ pair";
  EXPECT_EQ(add->input(1)->name, "x/dequantized");
}

}  // namespace
}  // namespace kiln
