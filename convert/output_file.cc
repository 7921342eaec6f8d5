// Output targets and temporary files (see output_file.h).
#include "convert/output_file.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <vector>

#include "convert/file_io.h"

namespace ringlm::internal {
namespace conv {
namespace {

// Temporary paths the signal handler removes. A fixed table of fixed buffers: the handler may
// only read memory that is never reallocated. A slot is filled before `used` is set and `used`
// cleared before the slot is reused, so the handler never sees a half-written path.
constexpr int kSlots = 4;
constexpr size_t kPathMax = 4096;
char g_tmp_path[kSlots][kPathMax];
volatile sig_atomic_t g_tmp_used[kSlots];
bool g_handlers_installed = false;
const int kCleanupSignals[] = {SIGINT, SIGTERM, SIGHUP};

void on_fatal_signal(int sig) {
  for (int i = 0; i < kSlots; ++i) {
    if (g_tmp_used[i]) unlink(g_tmp_path[i]);  // async-signal-safe
  }
  // Default action, then the signal again: it stays blocked until this handler returns, then
  // ends the process with the status the signal gives (128 + sig in a shell). Not SA_RESETHAND:
  // that resets the action when the signal is taken, before it is blocked, and a second signal
  // in that gap (timeout(1) sends SIGTERM to the child and then to its process group) killed
  // the process before the handler could unlink.
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);  // async-signal-safe
  raise(sig);
}

void install_handlers() {
  if (g_handlers_installed) return;
  g_handlers_installed = true;
  for (int sig : kCleanupSignals) {
    struct sigaction old;
    if (sigaction(sig, nullptr, &old) != 0 || old.sa_handler == SIG_IGN) continue;  // nohup, &
    if (old.sa_handler != SIG_DFL) continue;  // someone else's handler: leave it
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fatal_signal;
    sigemptyset(&sa.sa_mask);
    for (int other : kCleanupSignals) sigaddset(&sa.sa_mask, other);  // one handler at a time
    sa.sa_flags = 0;
    sigaction(sig, &sa, nullptr);
  }
}

int register_tmp(const std::string& path) {
  if (path.size() >= kPathMax) return -1;  // still removed on ordinary failure, not on a signal
  for (int i = 0; i < kSlots; ++i) {
    if (!g_tmp_used[i]) {
      memcpy(g_tmp_path[i], path.c_str(), path.size() + 1);
      g_tmp_used[i] = 1;
      return i;
    }
  }
  return -1;
}

void unregister_tmp(int slot) {
  if (slot >= 0) g_tmp_used[slot] = 0;
}

}  // namespace

bool check_output_target(const std::string& path, std::string* err) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return true;  // created
    *err = "cannot write '" + path + "': " + strerror(errno);
    return false;
  }
  if (S_ISLNK(st.st_mode)) {
    *err = "'" + path +
           "' is a symbolic link; refusing to replace it (give the path of the real file)";
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    *err = "'" + path + "' is " + file_kind_name(st.st_mode) +
           ", not a regular file; refusing to replace it";
    return false;
  }
  if (access(path.c_str(), W_OK) != 0 || (st.st_mode & (S_IWUSR | S_IWGRP | S_IWOTH)) == 0) {
    char mode[8];
    snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    *err = "'" + path + "' is read-only (mode " + mode +
           "); refusing to replace it (remove it or make it writable first)";
    return false;
  }
  return true;
}

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa, sb;
  return stat(a.c_str(), &sa) == 0 && stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

bool free_bytes_on(int fd, uint64_t* out) {
  struct statvfs vfs;
  // f_blocks == 0: a file system that reports no size (memfd, as bench's synthetic models use;
  // some pseudo file systems): its free space is unknown, not zero.
  if (fstatvfs(fd, &vfs) != 0 || vfs.f_frsize == 0 || vfs.f_blocks == 0) return false;
  *out = static_cast<uint64_t>(vfs.f_bavail) * static_cast<uint64_t>(vfs.f_frsize);
  return true;
}

TempOutput::~TempOutput() { discard(); }

bool TempOutput::create(const std::string& target, std::string* err) {
  discard();
  if (!check_output_target(target, err)) return false;
  std::string tmpl = target + ".tmp-XXXXXX";
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  // The file must not exist unregistered: with the signals blocked from before mkstemp until
  // the path is registered, a signal in between is delivered after, and removes it.
  install_handlers();
  sigset_t block, old;
  sigemptyset(&block);
  for (int sig : kCleanupSignals) sigaddset(&block, sig);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  const int fd = mkstemp(name.data());
  const int mkstemp_errno = errno;
  if (fd >= 0) slot_ = register_tmp(name.data());
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (fd < 0) {
    *err = "cannot create a temporary file next to '" + target + "': " + strerror(mkstemp_errno);
    return false;
  }
  fchmod(fd, 0644);
  target_ = target;
  tmp_ = name.data();
  fd_ = fd;
  return true;
}

bool TempOutput::close(std::string* err) {
  if (fd_ < 0) return true;
  bool ok = true;
  if (fsync(fd_) != 0) {
    *err = "fsync '" + tmp_ + "' failed: " + strerror(errno);
    ok = false;
  }
  if (::close(fd_) != 0 && ok) {
    *err = "close '" + tmp_ + "' failed: " + strerror(errno);
    ok = false;
  }
  fd_ = -1;
  return ok;
}

bool TempOutput::commit(std::string* err) {
  if (tmp_.empty()) {
    *err = "internal: no temporary file to commit";
    return false;
  }
  bool ok = close(err) && check_output_target(target_, err);
  if (ok && rename(tmp_.c_str(), target_.c_str()) != 0) {
    *err = "cannot rename '" + tmp_ + "' to '" + target_ + "': " + strerror(errno);
    ok = false;
  }
  if (!ok) {
    discard();
    return false;
  }
  unregister_tmp(slot_);  // after the rename: a signal in between unlinks a name that is gone
  slot_ = -1;
  tmp_.clear();
  return true;
}

void TempOutput::discard() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!tmp_.empty()) unlink(tmp_.c_str());
  unregister_tmp(slot_);
  slot_ = -1;
  tmp_.clear();
}

}  // namespace conv
}  // namespace ringlm::internal
