// The timing cache file: a round trip keeps every entry; a cache written for another device or library versions,
// a malformed file or another format is ignored with a warning that says so; layer signatures tell apart what
// must be timed apart (shapes, dtypes, attributes, TF32) and agree on what may share a tactic.
#include <gtest/gtest.h>

#ifdef KILN_HAVE_CUDA  // the timing cache belongs to the CUDA backend

#include <filesystem>
#include <fstream>

#include "backends/cuda/timing_cache.h"

namespace kiln::cuda {
namespace {

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("kiln_tc_" + name)).string();
}

TEST(TimingCache, RoundTripKeepsEveryEntry) {
  const std::string path = TempPath("roundtrip.json");
  TimingCache a;
  a.set_device_key("GPU X|sm_90|cuda 13000|cublasLt 130000|cudnn 91900");
  a.Put("Conv(...) in0:float16[1,3,8,8]", TimingEntry{"cudnn:eng=3;knobs=", 0.0123, 5});
  a.Put("MatMul() in0:float32[7,9]", TimingEntry{"cublaslt:00ff", 0.5, 8});
  ASSERT_TRUE(a.Save(path).ok());
  TimingCache b;
  b.set_device_key("GPU X|sm_90|cuda 13000|cublasLt 130000|cudnn 91900");
  auto w = b.Load(path);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_TRUE(w->empty()) << *w;
  ASSERT_EQ(b.size(), 2u);
  const TimingEntry* e = b.Find("Conv(...) in0:float16[1,3,8,8]");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->tactic, "cudnn:eng=3;knobs=");
  EXPECT_EQ(e->candidates, 5);
  EXPECT_EQ(b.Find("missing"), nullptr);
  std::filesystem::remove(path);
}

TEST(TimingCache, AnotherDeviceIsIgnoredWithAWarning) {
  const std::string path = TempPath("otherdevice.json");
  TimingCache a;
  a.set_device_key("NVIDIA H100|sm_90|cuda 13000|cublasLt 1|cudnn 1");
  a.Put("sig", TimingEntry{"t", 1, 2});
  ASSERT_TRUE(a.Save(path).ok());
  TimingCache b;
  b.set_device_key("NVIDIA H200|sm_90|cuda 13000|cublasLt 1|cudnn 1");
  auto w = b.Load(path);
  ASSERT_TRUE(w.ok());
  EXPECT_NE(w->find("ignored"), std::string::npos) << *w;
  EXPECT_NE(w->find("H100"), std::string::npos) << *w;
  EXPECT_EQ(b.size(), 0u);
  std::filesystem::remove(path);
}

TEST(TimingCache, MalformedOrForeignFilesAreIgnoredWithAWarning) {
  const std::string bad = TempPath("bad.json"), foreign = TempPath("foreign.json");
  std::ofstream(bad) << "{ not json";
  std::ofstream(foreign) << R"({"format": "something-else", "version": 1})";
  for (const auto& path : {bad, foreign}) {
    TimingCache c;
    c.set_device_key("dev");
    auto w = c.Load(path);
    ASSERT_TRUE(w.ok());
    EXPECT_NE(w->find("ignored"), std::string::npos) << *w;
    EXPECT_EQ(c.size(), 0u);
    std::filesystem::remove(path);
  }
  TimingCache c;
  c.set_device_key("dev");
  auto none = c.Load(TempPath("does_not_exist.json"));
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());  // no file yet: a first build, nothing to warn about
}

TEST(TimingCache, SignaturesSeparateWhatMustBeTimedApart) {
  Graph g;
  Value* x = g.GetOrAddValue("x");
  x->dtype = DataType::kFloat16;
  Value* w = g.AddConstant("w", Tensor(DataType::kFloat16, {8, 3, 3, 3}));
  Value* y = g.GetOrAddValue("y");
  y->dtype = DataType::kFloat16;
  Node* n = g.AddNode("Conv", "conv");
  n->inputs = {x, w};
  n->outputs = {y};
  n->attrs["pads"] = Attribute::Ints({1, 1, 1, 1});
  LayerSpec a{*n, {{1, 3, 8, 8}, {8, 3, 3, 3}}, {{1, 8, 8, 8}}, true};
  LayerSpec same{*n, {{1, 3, 8, 8}, {8, 3, 3, 3}}, {{1, 8, 8, 8}}, true};
  LayerSpec other_shape{*n, {{2, 3, 8, 8}, {8, 3, 3, 3}}, {{2, 8, 8, 8}}, true};
  LayerSpec no_tf32{*n, {{1, 3, 8, 8}, {8, 3, 3, 3}}, {{1, 8, 8, 8}}, false};
  EXPECT_EQ(LayerSignature(a), LayerSignature(same));
  EXPECT_NE(LayerSignature(a), LayerSignature(other_shape));
  EXPECT_NE(LayerSignature(a), LayerSignature(no_tf32));
  const std::string before = LayerSignature(a);
  n->attrs["pads"] = Attribute::Ints({0, 0, 0, 0});
  EXPECT_NE(LayerSignature(a), before);
  x->dtype = DataType::kFloat32;
  EXPECT_NE(LayerSignature(a), before);
}

}  // namespace
}  // namespace kiln::cuda

#endif  // KILN_HAVE_CUDA

// The file format itself (every build): wrong types are errors rather than exceptions (a "format" that is a
// number used to throw nlohmann's type_error out of TimingCache::Load), a FIFO is refused rather than read.
#include <sys/stat.h>

#include <filesystem>

#include "backends/timing_cache_file.h"

namespace kiln {
namespace {

TEST(TimingCacheFile, WrongTypesAreErrorsNotExceptions) {
  const char* cases[] = {
      R"({"format": 3, "version": 1, "device": "d", "entries": {}})",
      R"({"format": "kiln-timing-cache", "version": "1", "device": "d", "entries": {}})",
      R"({"format": "kiln-timing-cache", "version": 1, "device": 7, "entries": {}})",
      R"({"format": "kiln-timing-cache", "version": 1, "device": "d", "entries": []})",
      R"({"format": "kiln-timing-cache", "version": 1, "device": "d", "entries": {"s": 1}})",
      R"({"format": "kiln-timing-cache", "version": 1, "device": "d", "entries": {"s": {"tactic": 2}}})",
      R"({"format": "kiln-timing-cache", "version": 1, "device": "d", "entries": {"s": {"tactic": "t", "ms": "x"}}})",
      R"({"format": "kiln-timing-cache", "version": 1, "device": "d", "entries": {"s": {"tactic": "t", "candidates": -1}}})",
      R"([1, 2])", "", "\xff\xfe"};
  for (const char* text : cases) {
    auto r = ParseTimingCache(text, "tc.json");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.status().message().find("tc.json"), std::string::npos) << r.status().message();
  }
  auto ok = ParseTimingCache(
      R"({"format": "kiln-timing-cache", "version": 1, "device": "d", "entries": {"s": {"tactic": "t", "ms": 0.5, "candidates": 3}}})",
      "tc.json");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  ASSERT_EQ(ok->entries.count("s"), 1u);
  EXPECT_EQ(ok->entries.at("s").tactic, "t");
  EXPECT_EQ(ok->entries.at("s").candidates, 3);
  // What is written reads back the same, bytes that are not UTF-8 included.
  ok->entries["sig\xff"] = TimingEntry{"x", 1.0, 1};
  auto again = ParseTimingCache(SerializeTimingCache(*ok), "tc.json");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->entries.size(), 2u);
}

TEST(TimingCacheFile, AFifoIsRefusedNotRead) {
  const auto path = (std::filesystem::temp_directory_path() / "kiln_tc_fifo.json").string();
  std::filesystem::remove(path);
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  bool found = false;
  auto r = ReadTimingCacheFile(path, &found);  // would block forever if it were opened for reading
  EXPECT_TRUE(found);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not a regular file"), std::string::npos) << r.status().message();
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace kiln
