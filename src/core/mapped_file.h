// A read-only view of a whole file: memory-mapped where the system allows, else read into memory. Large models
// are parsed from it without first copying the file.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "core/error.h"

namespace kiln {

class MappedFile {
 public:
  static Result<MappedFile> Open(const std::string& path);
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::string_view bytes() const { return {data_, size_}; }

 private:
  MappedFile() = default;
  void Release();
  const char* data_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;                // data_ is an mmap of size_ bytes
  std::unique_ptr<char[]> fallback_;   // data_ points here where mmap failed
};

}  // namespace kiln
