// Small helpers the readers share: a read-only file with bounds-checked positional reads, and a
// sequential cursor over it. Every read is checked against the file size, so a truncated or
// hostile header produces an error message, never a read past the end.
#ifndef RINGLM_TOOLS_CONVERT_FILE_IO_H_
#define RINGLM_TOOLS_CONVERT_FILE_IO_H_

#include <stddef.h>
#include <stdint.h>

#include <memory>
#include <string>
#include <vector>

namespace ringlm::internal {
namespace conv {

// Opens `path` read-only (O_CLOEXEC) if it is a regular file; -1 with *err otherwise. The open
// is non-blocking and the type is checked with fstat on the opened descriptor, so a FIFO never
// blocks (a plain open() of a FIFO waits for a writer forever) and a directory, device or socket
// is refused with its kind named ("'x' is a directory, not a regular file"). The descriptor is
// returned blocking again. `what` prefixes the message ("model", "vocabulary", ...; may be "").
// Every input file the CLI and converter read goes through this (or InputFile::open).
int open_regular_file(const std::string& path, const std::string& what, std::string* err);

// "a directory", "a FIFO", "a character device", "a block device", "a socket", "a symbolic
// link", "a regular file", or "a special file" for st_mode `mode`.
const char* file_kind_name(unsigned mode);

class InputFile {
 public:
  // Opens `path` for reading (open_regular_file); on failure returns null and sets *err.
  static std::shared_ptr<InputFile> open(const std::string& path, std::string* err);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Reads exactly n bytes at `offset`; false (with *err) if [offset, offset + n) is not inside
  // the file or the read fails.
  bool read_at(uint64_t offset, void* dst, uint64_t n, std::string* err) const;

 private:
  InputFile() = default;
  int fd_ = -1;
  uint64_t size_ = 0;
  std::string path_;
};

// Sequential little-endian reads with a position; every read is bounds checked.
class Cursor {
 public:
  Cursor(const InputFile* f, uint64_t pos) : f_(f), pos_(pos) {}
  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return pos_ <= f_->size() ? f_->size() - pos_ : 0; }
  bool read(void* dst, uint64_t n, std::string* err);
  template <typename T>
  bool get(T* v, std::string* err) {
    return read(v, sizeof(T), err);
  }
  bool skip(uint64_t n, std::string* err);

 private:
  bool fill(uint64_t need, std::string* err);
  const InputFile* f_;
  uint64_t pos_;
  // Read-ahead buffer: [buf_pos_, buf_pos_ + buf_.size()) of the file.
  std::vector<uint8_t> buf_;
  uint64_t buf_pos_ = 0;
};

// Whole small file into a string (JSON configs). False with *err when missing, unreadable,
// not a regular file, or larger than kMaxTextFileBytes.
constexpr uint64_t kMaxTextFileBytes = 1ull << 30;
bool read_text_file(const std::string& path, std::string* out, std::string* err);

bool file_exists(const std::string& path);
bool is_directory(const std::string& path);

}  // namespace conv
}  // namespace ringlm::internal

#endif  // RINGLM_TOOLS_CONVERT_FILE_IO_H_
