// main() for the fuzz targets when they are not built with libFuzzer (gcc builds, cross builds):
// runs LLVMFuzzerTestOneInput once over every file named on the command line or found in a
// directory named there (sorted; dot files skipped). A missing directory replays nothing. A
// failing property aborts, so the test fails with the input's name printed just before.
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <algorithm>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace {

bool read_all(const std::string& path, std::vector<uint8_t>* out) {
  FILE* f = fopen(path.c_str(), "rb");
  if (!f) return false;
  out->clear();
  uint8_t buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out->insert(out->end(), buf, buf + n);
  fclose(f);
  return true;
}

void collect(const std::string& path, std::vector<std::string>* files) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    fprintf(stderr, "replay: %s does not exist (nothing to replay)\n", path.c_str());
    return;
  }
  if (!S_ISDIR(st.st_mode)) {
    files->push_back(path);
    return;
  }
  std::vector<std::string> names;
  if (DIR* d = opendir(path.c_str())) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      names.push_back(e->d_name);
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) collect(path + "/" + n, files);
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    if (argv[i][0] == '-') continue;  // libFuzzer-style flags are ignored
    collect(argv[i], &files);
  }
  std::vector<uint8_t> data;
  for (const std::string& f : files) {
    if (!read_all(f, &data)) {
      fprintf(stderr, "replay: cannot read %s\n", f.c_str());
      return 1;
    }
    fprintf(stderr, "replay: %s (%zu bytes)\n", f.c_str(), data.size());
    // A copy of exactly the input's size, so ASan sees reads past its end.
    static const uint8_t kEmpty[1] = {0};
    std::vector<uint8_t> exact(data.begin(), data.end());
    LLVMFuzzerTestOneInput(exact.empty() ? kEmpty : exact.data(), exact.size());
  }
  fprintf(stderr, "replay: %zu inputs ok\n", files.size());
  return 0;
}
