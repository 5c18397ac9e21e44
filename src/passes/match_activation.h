// The activation that may follow a Conv / Gemm / MatMul (or a residual Add after one), shared by the passes that
// fold it into a kiln fused node's epilogue (fuse_bias_activation.cpp, fuse_residual_add.cpp).
#pragma once

#include <string>
#include <vector>

#include "passes/fusion_util.h"

namespace kiln::fusion {

struct Activation {
  std::string kind;  // kiln_activation name ("Relu", "SiLU", ...); "" when none
  float alpha = 0.f, beta = 0.f;
  Node* last = nullptr;       // the node producing the activated value
  std::vector<Node*> inner;   // other nodes of the activation (SiLU's Sigmoid)
};

// The activation reading `y` (y's only reader(s)): Relu, LeakyRelu, Sigmoid, Tanh, Clip (constant bounds),
// HardSigmoid, Gelu (approximate none/tanh) or SiLU (y * Sigmoid(y)); kind stays empty when there is none.
Activation MatchActivation(const Uses& u, Value* y);

// kiln_activation / kiln_activation_alpha / kiln_activation_beta of `a` ("None" when kind is empty).
void SetActivationAttrs(Node* n, const Activation& a);

}  // namespace kiln::fusion
