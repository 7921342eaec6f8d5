// Helpers shared by the tests: locating ../shared, reading files into 64-byte-aligned memory.
#ifndef RINGLM_TESTS_TESTING_H_
#define RINGLM_TESTS_TESTING_H_

#include <stddef.h>
#include <stdint.h>

#include <string>
#include <vector>

namespace ringlm_test {

// The shared test-data directory: $RINGLM_SHARED_DIR, else the configure-time default.
// Returns "" when it does not exist.
std::string shared_dir();

// Path under shared_dir(), or "" when shared_dir() is absent or the file does not exist.
// Tests call GTEST_SKIP() << "..." when this is empty.
std::string shared_path(const std::string& rel);

bool read_file(const std::string& path, std::string* out);

// A byte buffer whose data() is 64-byte aligned (model bytes must be).
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t n) { resize(n); }
  void resize(size_t n);
  void assign(const void* p, size_t n);
  uint8_t* data() { return reinterpret_cast<uint8_t*>(storage_.data()) + offset_; }
  const uint8_t* data() const {
    return reinterpret_cast<const uint8_t*>(storage_.data()) + offset_;
  }
  size_t size() const { return size_; }

 private:
  std::vector<uint64_t> storage_;
  size_t offset_ = 0;
  size_t size_ = 0;
};

bool read_file_aligned(const std::string& path, AlignedBuffer* out);

// Path of the built `ringlm` executable, as the start of a shell command: when cross-compiled it is
// prefixed with the emulator ("<qemu-run.sh> aarch64 ... <path>"), so use it in run_command()/
// popen/system strings, unquoted, not as a file name.
std::string ringlm_bin();

// The `ringlm` executable's file name alone (no emulator): for access()/stat() checks.
std::string ringlm_bin_path();

// A fresh temporary directory (removed by the OS's tmp cleaning, not by the test).
std::string temp_dir();

// Runs a shell command, returns its exit status and captures stdout (stderr goes to the log).
int run_command(const std::string& cmd, std::string* out);

// Writes `data` to a new file named after `name` in a temporary directory of this process (a
// counter keeps every name unique: rewriting one file over and over is slow on ext4). Returns
// its path, or "" when it cannot be written.
std::string write_temp(const std::string& name, const std::string& data);

// Whether this test binary is built with ASan or TSan (about 5x slower: lighter sweeps there).
inline bool sanitized() {
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
  return true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
  return true;
#else
  return false;
#endif
#else
  return false;
#endif
}

// Whether the tests run under an emulator (qemu-user: ringlm_bin() carries the emulator prefix).
inline bool emulated() { return ringlm_bin() != ringlm_bin_path(); }

// Whether this run is one of the slow ones (qemu, ASan, TSan): tests keep their checks but run
// shorter sweeps there, so the whole suite stays inside CI's time (the full sweeps run in release).
inline bool light() { return emulated() || sanitized(); }

}  // namespace ringlm_test

#endif  // RINGLM_TESTS_TESTING_H_
