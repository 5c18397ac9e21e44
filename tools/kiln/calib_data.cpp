#include "calib_data.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "kiln/error.h"
#include "npy.h"
#include "npz.h"

namespace kiln::cli {

namespace {

// Checks one array against the input it feeds and cuts it into batches of the input's shape: an array whose first
// dim is a multiple of a static batch dim holds several batches (one file of 512 images for a batch-32 model).
Status Split(const InputSpec& in, const Tensor& t, const std::string& where, std::vector<Tensor>& out) {
  if (t.dtype() != in.dtype)
    return Err(StatusCode::kInvalidArgument,
               "{} is {} but input '{}' takes {} (convert it, e.g. numpy's x.astype(np.{}))", where,
               DataTypeName(t.dtype()), in.name, DataTypeName(in.dtype), DataTypeName(in.dtype));
  if (t.rank() != static_cast<int64_t>(in.dims.size()))
    return Err(StatusCode::kInvalidArgument, "{} has shape {} but input '{}' has rank {} ({})", where,
               ShapeToString(t.shape()), in.name, in.dims.size(), ShapeToString(in.dims));
  for (size_t d = 1; d < in.dims.size(); ++d)
    if (in.dims[d] >= 0 && in.dims[d] != t.dim(static_cast<int64_t>(d)))
      return Err(StatusCode::kInvalidArgument, "{} has shape {} but input '{}' is {}", where, ShapeToString(t.shape()),
                 in.name, ShapeToString(in.dims));
  if (in.dims.empty() || in.dims[0] < 0 || in.dims[0] == t.dim(0)) {
    out.push_back(t);
    return Status::Ok();
  }
  const int64_t b = in.dims[0];
  if (b == 0 || t.dim(0) % b != 0)
    return Err(StatusCode::kInvalidArgument,
               "{} holds {} rows along the batch axis; input '{}' takes batches of {}: give a multiple of {}", where,
               t.dim(0), in.name, b, b);
  const size_t bytes = t.nbytes() / static_cast<size_t>(t.dim(0) / b);
  Dims shape = t.shape();
  shape[0] = b;
  for (int64_t k = 0; k < t.dim(0) / b; ++k) {
    Tensor part(t.dtype(), shape);
    std::memcpy(part.raw(), static_cast<const uint8_t*>(t.raw()) + k * bytes, bytes);
    out.push_back(std::move(part));
  }
  return Status::Ok();
}

}  // namespace

// The batches of one file, in order.
Result<std::vector<std::map<std::string, Tensor>>> LoadBatches(const std::string& path,
                                                                const std::vector<InputSpec>& inputs) {
  std::vector<std::pair<std::string, Tensor>> arrays;
  const bool npz = path.size() > 4 && path.compare(path.size() - 4, 4, ".npz") == 0;
  if (npz) {
    KILN_ASSIGN_OR_RETURN(arrays, ReadNpz(path));
  } else {
    if (inputs.size() != 1)
      return Err(StatusCode::kInvalidArgument,
                 "{}: a .npy file feeds a model with one input; this one has {}: give .npz files holding an array "
                 "per input, named like the inputs",
                 path, inputs.size());
    KILN_ASSIGN_OR_RETURN(Tensor t, ReadNpy(path));
    arrays.emplace_back(inputs[0].name, std::move(t));
  }
  // Arrays by input: by name, or the one array of a one-input model whatever its name.
  std::vector<std::vector<Tensor>> per_input(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor* t = nullptr;
    std::string where;
    for (const auto& [name, a] : arrays)
      if (name == inputs[i].name) t = &a, where = fmt::format("'{}' array '{}'", path, name);
    if (!t && inputs.size() == 1 && arrays.size() == 1)
      t = &arrays[0].second, where = fmt::format("'{}' array '{}'", path, arrays[0].first);
    if (!t) {
      std::string names;
      for (const auto& a : arrays) names += (names.empty() ? "" : ", ") + a.first;
      return Err(StatusCode::kInvalidArgument, "'{}' has no array for input '{}' (its arrays: {})", path,
                 inputs[i].name, names);
    }
    KILN_RETURN_IF_ERROR(Split(inputs[i], *t, where, per_input[i]));
    if (per_input[i].size() != per_input[0].size())
      return Err(StatusCode::kInvalidArgument, "'{}': input '{}' gives {} batches but '{}' gives {}", path,
                 inputs[i].name, per_input[i].size(), inputs[0].name, per_input[0].size());
  }
  std::vector<std::map<std::string, Tensor>> batches(per_input[0].size());
  for (size_t i = 0; i < inputs.size(); ++i)
    for (size_t k = 0; k < batches.size(); ++k) batches[k][inputs[i].name] = per_input[i][k];
  return batches;
}

Result<std::vector<std::string>> ListBatchFiles(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    return Err(StatusCode::kNotFound, "--data={}: not a folder (it holds the calibration batches: .npz or .npy files)",
               dir);
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string ext = e.path().extension().string();
    if ((ext == ".npz" || ext == ".npy") && e.is_regular_file(ec)) files.push_back(e.path().string());
  }
  if (ec) return Err(StatusCode::kIoError, "--data={}: cannot list the folder: {}", dir, ec.message());
  if (files.empty()) return Err(StatusCode::kNotFound, "--data={}: the folder holds no .npz or .npy file", dir);
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace kiln::cli
