// kiln serve — KServe v2 inference requests and responses as JSON (with Triton's binary tensor data extension):
// tensors' "data" (flat or nested arrays, BOOL as true/false, FP16/BF16 as numbers) to and from element bytes, every
// malformed part answered with a 400 naming the input and what is wrong.
#pragma once

#include <string>
#include <string_view>

#include "infer_types.h"

namespace kiln::serve {

// `header` is the JSON request; `binary` the bytes after it (inputs with parameters.binary_data_size take theirs in
// order). Fills request's id, inputs, requested outputs, binary_data_output and the "timeout" parameter (us). Inputs
// and outputs with Triton's shared-memory parameters get their SharedMemoryRef (the server looks the region up).
Outcome ParseInferRequest(std::string_view header, std::string_view binary, InferRequest* request);

// The JSON response, and the binary section for the outputs asked for as binary (empty when none). Outputs written to
// shared memory carry no data, and their region in "parameters".
void WriteInferResponse(const InferResponse& response, std::string* header, std::string* binary);

// Half-precision conversions (round to nearest even), for FP16 / BF16 tensors given as JSON numbers.
uint16_t FloatToHalf(float f);
float HalfToFloat(uint16_t h);
uint16_t FloatToBFloat16(float f);
float BFloat16ToFloat(uint16_t b);

}  // namespace kiln::serve
