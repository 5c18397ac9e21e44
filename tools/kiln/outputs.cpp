// Writing outputs and JSON reports.
#include <filesystem>
#include <fstream>

#include "commands.h"
#include "kiln/error.h"
#include "npy.h"

namespace kiln::cli {

Status WriteJsonFile(const std::string& path, const nlohmann::json& j) {
  std::ofstream f(path);
  if (!f) return Err(StatusCode::kIoError, "cannot write '{}'", path);
  f << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  if (!f) return Err(StatusCode::kIoError, "writing '{}' failed", path);
  return Status::Ok();
}

Status ExportOutputs(const std::string& path, const std::vector<NamedTensor>& outputs) {
  if (path.size() > 5 && path.substr(path.size() - 5) == ".json") {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& o : outputs) {
      Tensor t = Tensor::View(o.dtype, o.shape, const_cast<void*>(o.data));
      std::vector<double> vals(static_cast<size_t>(t.numel()));
      for (int64_t i = 0; i < t.numel(); ++i) vals[i] = t.GetAsDouble(i);
      j.push_back({{"name", o.name}, {"dtype", DataTypeName(o.dtype)}, {"dimensions", o.shape}, {"values", vals}});
    }
    return WriteJsonFile(path, j);
  }
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) return Err(StatusCode::kIoError, "cannot create output folder '{}': {}", path, ec.message());
  for (const auto& o : outputs) {
    std::string name = o.name;
    for (char& c : name)
      if (c == '/' || c == ':' || c == '\\') c = '_';
    Tensor t = Tensor::View(o.dtype, o.shape, const_cast<void*>(o.data));
    KILN_RETURN_IF_ERROR(WriteNpy((std::filesystem::path(path) / (name + ".npy")).string(), t));
  }
  return Status::Ok();
}

}  // namespace kiln::cli
