#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kiln {

Result<MappedFile> MappedFile::Open(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; only regular files are read (a FIFO or device
  // would block or never end).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return Err(StatusCode::kIoError, "cannot open '{}': {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return Err(StatusCode::kIoError, "cannot stat '{}': {}", path, std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Err(StatusCode::kInvalidArgument, "'{}' is not a regular file (a FIFO, device or folder?): give a file",
               path);
  }
  MappedFile f;
  f.size_ = static_cast<size_t>(st.st_size);
  if (f.size_ == 0) {
    ::close(fd);
    return f;
  }
  void* p = ::mmap(nullptr, f.size_, PROT_READ, MAP_PRIVATE, fd, 0);
  if (p != MAP_FAILED) {
    ::madvise(p, f.size_, MADV_SEQUENTIAL);
    f.data_ = static_cast<const char*>(p);
    f.mapped_ = true;
    ::close(fd);
    return f;
  }
  // Not mappable (a pipe, some network file systems): read it.
  f.fallback_.reset(new char[f.size_]);
  size_t done = 0;
  while (done < f.size_) {
    const ssize_t n = ::read(fd, f.fallback_.get() + done, f.size_ - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = errno;
      ::close(fd);
      return Err(StatusCode::kIoError, "cannot read '{}': {}", path, n == 0 ? "unexpected end of file" : std::strerror(e));
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  f.data_ = f.fallback_.get();
  return f;
}

MappedFile::MappedFile(MappedFile&& o) noexcept { *this = std::move(o); }

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    Release();
    data_ = o.data_;
    size_ = o.size_;
    mapped_ = o.mapped_;
    fallback_ = std::move(o.fallback_);
    o.data_ = nullptr;
    o.size_ = 0;
    o.mapped_ = false;
  }
  return *this;
}

MappedFile::~MappedFile() { Release(); }

void MappedFile::Release() {
  if (mapped_ && data_) ::munmap(const_cast<char*>(data_), size_);
  data_ = nullptr;
  mapped_ = false;
  fallback_.reset();
}

}  // namespace kiln
