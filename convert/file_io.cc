#include "convert/file_io.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

namespace ringlm::internal {
namespace conv {

const char* file_kind_name(unsigned mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "a special file";
}

int open_regular_file(const std::string& path, const std::string& what, std::string* err) {
  const std::string name = (what.empty() ? "" : what + " ") + "'" + path + "'";
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int e = errno;
    struct stat st;
    // open() of a socket fails with ENXIO ("No such device or address"): name the kind instead.
    if (stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
      *err = name + " is " + file_kind_name(st.st_mode) + ", not a regular file";
    } else {
      *err = "cannot open " + name + ": " + strerror(e);
    }
    return -1;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    *err = "cannot stat " + name + ": " + strerror(errno);
    ::close(fd);
    return -1;
  }
  if (!S_ISREG(st.st_mode)) {
    *err = name + " is " + file_kind_name(st.st_mode) + ", not a regular file";
    ::close(fd);
    return -1;
  }
  const int fl = fcntl(fd, F_GETFL);
  if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  return fd;
}

std::shared_ptr<InputFile> InputFile::open(const std::string& path, std::string* err) {
  const int fd = open_regular_file(path, "", err);
  if (fd < 0) return nullptr;
  struct stat st;
  if (fstat(fd, &st) != 0) {
    *err = "cannot stat '" + path + "': " + strerror(errno);
    ::close(fd);
    return nullptr;
  }
  std::shared_ptr<InputFile> f(new InputFile());
  f->fd_ = fd;
  f->size_ = static_cast<uint64_t>(st.st_size);
  f->path_ = path;
  return f;
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

bool InputFile::read_at(uint64_t offset, void* dst, uint64_t n, std::string* err) const {
  if (offset > size_ || n > size_ - offset) {
    *err = "'" + path_ + "' is truncated: need bytes [" + std::to_string(offset) + ", +" +
           std::to_string(n) + ") of a " + std::to_string(size_) + "-byte file";
    return false;
  }
  uint8_t* p = static_cast<uint8_t*>(dst);
  while (n > 0) {
    const size_t chunk = static_cast<size_t>(n < (1u << 30) ? n : (1u << 30));
    ssize_t r = ::pread(fd_, p, chunk, static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      *err = "read error in '" + path_ + "'" + (r < 0 ? std::string(": ") + strerror(errno) : "");
      return false;
    }
    p += r;
    offset += static_cast<uint64_t>(r);
    n -= static_cast<uint64_t>(r);
  }
  return true;
}

bool Cursor::fill(uint64_t need, std::string* err) {
  constexpr uint64_t kChunk = 1u << 20;
  const uint64_t avail = f_->size() > pos_ ? f_->size() - pos_ : 0;
  if (need > avail) {
    *err = "'" + f_->path() + "' is truncated: need " + std::to_string(need) + " bytes at offset " +
           std::to_string(pos_) + ", " + std::to_string(avail) + " left";
    return false;
  }
  const uint64_t want = std::min<uint64_t>(avail, std::max<uint64_t>(need, kChunk));
  buf_.resize(static_cast<size_t>(want));
  buf_pos_ = pos_;
  return f_->read_at(pos_, buf_.data(), want, err);
}

bool Cursor::read(void* dst, uint64_t n, std::string* err) {
  if (n == 0) return true;
  const bool buffered = pos_ >= buf_pos_ && pos_ - buf_pos_ <= buf_.size() &&
                        n <= buf_.size() - (pos_ - buf_pos_);
  if (!buffered) {
    if (n > (1u << 24)) {  // large: read straight through
      if (!f_->read_at(pos_, dst, n, err)) return false;
      pos_ += n;
      return true;
    }
    if (!fill(n, err)) return false;
  }
  memcpy(dst, buf_.data() + (pos_ - buf_pos_), static_cast<size_t>(n));
  pos_ += n;
  return true;
}

bool Cursor::skip(uint64_t n, std::string* err) {
  if (n > remaining()) {
    *err = "'" + f_->path() + "' is truncated at offset " + std::to_string(pos_);
    return false;
  }
  pos_ += n;
  return true;
}

bool read_text_file(const std::string& path, std::string* out, std::string* err) {
  const std::shared_ptr<InputFile> f = InputFile::open(path, err);
  if (!f) return false;
  // Configs, templates and vocabularies are megabytes; the cap keeps a hostile (e.g. sparse)
  // file from a multi-gigabyte allocation.
  if (f->size() > kMaxTextFileBytes) {
    *err = "'" + path + "' is " + std::to_string(f->size()) + " bytes; text inputs are limited to " +
           std::to_string(kMaxTextFileBytes >> 20) + " MiB";
    return false;
  }
  std::string s(static_cast<size_t>(f->size()), '\0');
  if (!s.empty() && !f->read_at(0, &s[0], s.size(), err)) return false;
  *out = std::move(s);
  return true;
}

bool file_exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool is_directory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace conv
}  // namespace ringlm::internal
