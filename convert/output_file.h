// Files the CLI writes (`ringlm convert -o`, `ringlm embed -o / --header`): written to a temporary
// file next to the target, then renamed over it, so a failed or interrupted write never leaves a
// half-written model under the target's name.
//
// Target policy (README "Output files"): the target must not exist, or be a regular file the
// user may write. Anything else is refused before a byte is written, with its kind named:
// directories, FIFOs, character / block devices, sockets, and symbolic links (a symlink is not
// followed: replacing it would cut the link, writing through it would touch a file the command
// line does not name; give the real path instead). A regular file without write permission
// (access(W_OK) fails, or no write bit is set at all, which root's access() ignores) is refused
// too rather than silently replaced.
#ifndef RINGLM_TOOLS_CONVERT_OUTPUT_FILE_H_
#define RINGLM_TOOLS_CONVERT_OUTPUT_FILE_H_

#include <stdint.h>

#include <string>

namespace ringlm::internal {
namespace conv {

// True when `path` may be created or replaced under the policy above; false with *err naming
// why not.
bool check_output_target(const std::string& path, std::string* err);

// A temporary file `<target>.tmp-XXXXXX` (mkstemp, mode 0644) in the target's directory, so the
// final rename() is atomic. While it exists its path is registered with a SIGINT / SIGTERM /
// SIGHUP handler that unlinks it (async-signal-safe unlink only) and re-raises the signal with
// the default action, so an interrupted command leaves no temporary file. Signals the process
// ignores (nohup) stay ignored.
class TempOutput {
 public:
  TempOutput() = default;
  ~TempOutput();  // removes the temporary file unless commit() succeeded
  TempOutput(const TempOutput&) = delete;
  TempOutput& operator=(const TempOutput&) = delete;

  // check_output_target(target), then creates the temporary file. False with *err.
  bool create(const std::string& target, std::string* err);
  int fd() const { return fd_; }
  const std::string& path() const { return tmp_; }
  // fsync + close the descriptor (fd() is -1 afterwards). False with *err.
  bool close(std::string* err);
  // Re-checks the target (it may have changed while writing) and renames the temporary file over
  // it. Closes first if still open. False with *err (the temporary file is then removed).
  bool commit(std::string* err);
  // Removes the temporary file now.
  void discard();

 private:
  std::string target_;
  std::string tmp_;
  int fd_ = -1;
  int slot_ = -1;  // signal-cleanup registration
};

// True when `a` and `b` both exist and are the same file (device and inode), e.g. an output
// that would replace the command's own input.
bool same_file(const std::string& a, const std::string& b);

// Free bytes for an unprivileged writer on the file system holding `fd`; false when unknown.
bool free_bytes_on(int fd, uint64_t* out);

}  // namespace conv
}  // namespace ringlm::internal

#endif  // RINGLM_TOOLS_CONVERT_OUTPUT_FILE_H_
