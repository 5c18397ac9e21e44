// The builder's layout step (src/runtime/builder_plan.h) takes its settings from BuilderConfig
// (setConvolutionLayout, setLayoutChannelPadding); KILN_LAYOUT and KILN_LAYOUT_PAD override them for experiments,
// and unknown values fail the build with a sentence naming the setting and its values. CPU only: the step rewrites
// the graph; nothing runs.
#include <gtest/gtest.h>

#include <cstdlib>

#include "runtime/builder_plan.h"
#include "testing.h"

namespace kiln {
namespace {

// Sets an environment variable for the scope of one test.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~ScopedEnv() { unsetenv(name_); }

 private:
  const char* name_;
};

// x[1, cin, 8, 8] -> Conv 3x3 (cout 8) -> Relu, in `dt`.
struct ConvNet : testing::TestGraph {
  ConvNet(DataType t, int64_t cin) {
    dt = t;
    Value* x = Input("x", {1, cin, 8, 8});
    Value* y = Op("Conv", "conv", {x, Const("w", {8, cin, 3, 3}), Const("b", {8})},
                  {{"kernel_shape", Attribute::Ints({3, 3})}, {"pads", Attribute::Ints({1, 1, 1, 1})}});
    Output(Op("Relu", "relu", {y}));
    Finish();
  }
  bool ConvIsNhwc() const { return Find("Conv")->gets("kiln_layout", "") == "NHWC"; }
  int64_t ConvInputChannels() const {  // of its weights: zero-padded ones included
    const Value* w = Find("Conv")->inputs[1];
    return w->is_const() ? w->const_value->shape()[1] : w->shape[1].value;
  }
};

class QuietLogger : public ILogger {
 public:
  void log(Severity, const char*) noexcept override {}
};

Status Plan(ConvNet& net, const BuilderConfig& cfg) {
  BuildReport rep;
  QuietLogger logger;
  return PlanLayout(net.g, cfg, rep, logger);
}

TEST(BuilderPlan, ConvolutionLayoutComesFromTheConfig) {
  unsetenv("KILN_LAYOUT");
  unsetenv("KILN_LAYOUT_PAD");
  {
    ConvNet net(DataType::kFloat16, 8);
    ASSERT_TRUE(Plan(net, BuilderConfig()).ok());
    EXPECT_TRUE(net.ConvIsNhwc());  // kAuto: reduced precision goes NHWC
  }
  {
    ConvNet net(DataType::kFloat16, 8);
    BuilderConfig cfg;
    cfg.setConvolutionLayout(ConvolutionLayout::kNCHW);
    ASSERT_TRUE(Plan(net, cfg).ok());
    EXPECT_FALSE(net.ConvIsNhwc());
  }
  {
    ConvNet net(DataType::kFloat32, 8);
    BuilderConfig cfg;
    cfg.clearFlag(BuilderFlag::kTF32);
    ASSERT_TRUE(Plan(net, cfg).ok());
    EXPECT_FALSE(net.ConvIsNhwc());  // kAuto: float32 stays NCHW without TF32
  }
  {
    ConvNet net(DataType::kFloat32, 8);
    BuilderConfig cfg;
    cfg.clearFlag(BuilderFlag::kTF32);
    cfg.setConvolutionLayout(ConvolutionLayout::kNHWCFloat32);
    ASSERT_TRUE(Plan(net, cfg).ok());
    EXPECT_TRUE(net.ConvIsNhwc());
  }
  {
    ConvNet net(DataType::kFloat32, 8);
    BuilderConfig cfg;  // TF32 allowed
    cfg.setConvolutionLayout(ConvolutionLayout::kNHWCReducedOnly);
    ASSERT_TRUE(Plan(net, cfg).ok());
    EXPECT_FALSE(net.ConvIsNhwc());
  }
  {
    ConvNet net(DataType::kFloat16, 3);  // an RGB stem
    BuilderConfig cfg;
    cfg.setConvolutionLayout(ConvolutionLayout::kNHWCChannels8);
    ASSERT_TRUE(Plan(net, cfg).ok());
    EXPECT_FALSE(net.ConvIsNhwc());
  }
}

TEST(BuilderPlan, ChannelPaddingComesFromTheConfig) {
  unsetenv("KILN_LAYOUT");
  unsetenv("KILN_LAYOUT_PAD");
  {
    ConvNet net(DataType::kFloat16, 3);
    ASSERT_TRUE(Plan(net, BuilderConfig()).ok());
    ASSERT_TRUE(net.ConvIsNhwc());
    EXPECT_EQ(net.ConvInputChannels(), 4);  // the default pads 3 channels to 4
  }
  {
    ConvNet net(DataType::kFloat16, 3);
    BuilderConfig cfg;
    cfg.setLayoutChannelPadding(0);
    ASSERT_TRUE(Plan(net, cfg).ok());
    ASSERT_TRUE(net.ConvIsNhwc());
    EXPECT_EQ(net.ConvInputChannels(), 3);
  }
  ConvNet net(DataType::kFloat16, 3);
  BuilderConfig cfg;
  cfg.setLayoutChannelPadding(3);
  Status st = Plan(net, cfg);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("0, 4, 8 or 16, not 3"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("setLayoutChannelPadding"), std::string::npos) << st.ToString();
}

TEST(BuilderPlan, TheEnvironmentOverridesTheConfig) {
  {
    ScopedEnv layout("KILN_LAYOUT", "nchw");
    ConvNet net(DataType::kFloat16, 8);
    BuilderConfig cfg;
    cfg.setConvolutionLayout(ConvolutionLayout::kNHWCFloat32);
    ASSERT_TRUE(Plan(net, cfg).ok());
    EXPECT_FALSE(net.ConvIsNhwc());
  }
  {
    ScopedEnv pad("KILN_LAYOUT_PAD", "8");
    ConvNet net(DataType::kFloat16, 3);
    BuilderConfig cfg;
    cfg.setLayoutChannelPadding(0);
    ASSERT_TRUE(Plan(net, cfg).ok());
    EXPECT_EQ(net.ConvInputChannels(), 8);
  }
  {
    ScopedEnv layout("KILN_LAYOUT", "nhwc");
    ConvNet net(DataType::kFloat16, 8);
    Status st = Plan(net, BuilderConfig());
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("KILN_LAYOUT must be nchw, nhwc-fp32, nhwc-fp16 or nhwc-c8, not 'nhwc'"),
              std::string::npos)
        << st.ToString();
  }
  {
    ScopedEnv pad("KILN_LAYOUT_PAD", "5");
    ConvNet net(DataType::kFloat16, 8);
    Status st = Plan(net, BuilderConfig());
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("KILN_LAYOUT_PAD must be 0, 4, 8 or 16, not '5'"), std::string::npos) << st.ToString();
  }
}

}  // namespace
}  // namespace kiln
