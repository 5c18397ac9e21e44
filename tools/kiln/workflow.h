// The workflow commands of kiln's documents, each a thin shell over a kiln subcommand that prints the command's
// JSON report on stdout:
//   kiln convert --input M.onnx --output M.engine [build flags]          -> kiln build --onnx --saveEngine
//   kiln optimize --model M.onnx --precision fp32|fp16|bf16|int8|fp8|best [--output E] [build flags]
//                                                                        -> kiln build --<precision> (E defaults to
//                                                                           M.<precision>.engine beside the model)
//   kiln calibrate --model M.onnx --data DIR [--calib C] [flags]          -> kiln calibrate --onnx (C: M.cache)
//   kiln benchmark --engine M.engine [--iterations N] [flags]            -> kiln bench --loadEngine
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kiln/status.h"

namespace kiln::cli {

struct Workflow {
  std::string name;               // "convert", "optimize", "calibrate", "benchmark"
  std::vector<std::string> args;  // the kiln command line it stands for (args[0] the program)
};

// The translation when argv is a workflow command (calibrate only in its --model form), nullopt otherwise; an error
// for a workflow command missing what it needs or given a value it cannot take.
Result<std::optional<Workflow>> TranslateWorkflow(const std::vector<std::string>& argv);

}  // namespace kiln::cli
