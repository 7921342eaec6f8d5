#include "testing.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

namespace ringlm_test {

std::string shared_dir() {
  const char* env = getenv("RINGLM_SHARED_DIR");
  std::string dir = env && *env ? env : RINGLM_SHARED_DIR_DEFAULT;
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return "";
  return dir;
}

std::string shared_path(const std::string& rel) {
  std::string dir = shared_dir();
  if (dir.empty()) return "";
  std::string p = dir + "/" + rel;
  struct stat st;
  if (stat(p.c_str(), &st) != 0) return "";
  return p;
}

bool read_file(const std::string& path, std::string* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::ostringstream ss;
  ss << f.rdbuf();
  *out = ss.str();
  return true;
}

void AlignedBuffer::resize(size_t n) {
  storage_.assign(n / 8 + 16, 0);
  uintptr_t p = reinterpret_cast<uintptr_t>(storage_.data());
  offset_ = static_cast<size_t>((64 - (p % 64)) % 64);
  size_ = n;
}

void AlignedBuffer::assign(const void* p, size_t n) {
  resize(n);
  if (n) memcpy(data(), p, n);
}

bool read_file_aligned(const std::string& path, AlignedBuffer* out) {
  std::string s;
  if (!read_file(path, &s)) return false;
  out->assign(s.data(), s.size());
  return true;
}

std::string ringlm_bin() {
#ifdef RINGLM_EMULATOR
  // Cross-compiled: the target executable runs under CMAKE_CROSSCOMPILING_EMULATOR (qemu-run.sh).
  return std::string(RINGLM_EMULATOR) + " " + RINGLM_BIN_DIR + "/ringlm";
#else
  return std::string(RINGLM_BIN_DIR) + "/ringlm";
#endif
}

std::string ringlm_bin_path() { return std::string(RINGLM_BIN_DIR) + "/ringlm"; }

std::string temp_dir() {
  char tmpl[] = "/tmp/ringlm-test-XXXXXX";
  char* d = mkdtemp(tmpl);
  return d ? std::string(d) : std::string("/tmp");
}

int run_command(const std::string& cmd, std::string* out) {
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return -1;
  std::string s;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) s.append(buf, n);
  int st = pclose(p);
  if (out) *out = s;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

std::string write_temp(const std::string& name, const std::string& data) {
  static const std::string dir = temp_dir();
  static int counter = 0;
  const std::string path = dir + "/" + std::to_string(counter++) + "-" + name;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
  f.close();
  return f ? path : std::string();
}

}  // namespace ringlm_test
