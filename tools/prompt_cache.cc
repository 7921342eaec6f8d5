#include "prompt_cache.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "mapped_file.h"

namespace {

constexpr char kMagic[8] = {'R', 'L', 'M', 'P', 'C', '0', '0', '1'};

}  // namespace

uint32_t prompt_cache_restore(const std::string& path, rlm_session* s,
                              const std::vector<int32_t>& prompt) {
  struct stat sb;
  if (stat(path.c_str(), &sb) != 0 && errno == ENOENT) return 0;  // no cache yet
  // Mapped, not read: a cache holds the whole K/V of the prompt (tens of MB), and
  // rlm_session_restore reads it once. A writer renames a new file over it, so the mapping
  // never sees half a file.
  MappedFile file;
  std::string err;
  if (!file.open(path, &err)) {
    fprintf(stderr, "ringlm: --prompt-cache %s: not used (%s); it will be replaced\n",
            path.c_str(), err.c_str());
    return 0;
  }
  const char* const data = static_cast<const char*>(file.data());
  const size_t size = file.size();
  uint32_t n = 0;
  if (size < 16 || memcmp(data, kMagic, 8) != 0) {
    fprintf(stderr, "ringlm: --prompt-cache %s: not a prompt cache; it will be replaced\n",
            path.c_str());
    return 0;
  }
  memcpy(&n, data + 8, 4);
  // Compared by division: n * 4 can overflow a 32-bit size_t.
  if (n > (size - 16) / 4) {
    fprintf(stderr, "ringlm: --prompt-cache %s: truncated; it will be replaced\n", path.c_str());
    return 0;
  }
  // The common prefix of the file's tokens and the prompt.
  uint32_t common = 0;
  while (common < n && common < prompt.size()) {
    int32_t t;
    memcpy(&t, data + 16 + static_cast<size_t>(common) * 4, 4);
    if (t != prompt[common]) break;
    ++common;
  }
  // All of the file's tokens begin the prompt: keep them all (for an equal prompt the saved
  // logits stand in for its last token). Otherwise keep at most all but the prompt's last token:
  // a rewind drops the logits, so a token must be left to run.
  const bool whole = common == n;
  const uint32_t keep =
      whole ? n : std::min<uint32_t>(common, static_cast<uint32_t>(prompt.size()) - 1);
  if (keep == 0) return 0;  // another prompt
  const size_t at = 16 + static_cast<size_t>(n) * 4;
  const rlm_status st = rlm_session_restore(s, data + at, size - at);
  if (st != RLM_OK) {
    fprintf(stderr, "ringlm: --prompt-cache %s: not used (%s: %s)\n", path.c_str(),
            rlm_status_string(st), rlm_session_error(s));
    return 0;
  }
  // The snapshot must hold exactly the file's tokens, run (a file written by prompt_cache_save
  // does); anything else would continue from other positions than the ones counted here.
  if (rlm_session_position(s) != n) {
    fprintf(stderr,
            "ringlm: --prompt-cache %s: not used (its snapshot holds %u positions, its token list "
            "%u); it will be replaced\n",
            path.c_str(), rlm_session_position(s), n);
    rlm_session_reset(s);
    return 0;
  }
  if (whole) return n;
  const rlm_status rw = rlm_session_rewind(s, keep);
  if (rw != RLM_OK) {
    fprintf(stderr,
            "ringlm: --prompt-cache %s: its first %u tokens match but it cannot be rewound to "
            "them (%s: %s); the whole prompt runs\n",
            path.c_str(), keep, rlm_status_string(rw), rlm_session_error(s));
    rlm_session_reset(s);
    return 0;
  }
  return keep;
}

void prompt_cache_save(const std::string& path, rlm_session* s,
                       const std::vector<int32_t>& prompt) {
  size_t need = 0;
  rlm_session_snapshot_bytes(s, &need);
  std::string b(16 + prompt.size() * 4 + need, '\0');
  memcpy(&b[0], kMagic, 8);
  const uint32_t n = static_cast<uint32_t>(prompt.size());
  memcpy(&b[8], &n, 4);
  if (n) memcpy(&b[16], prompt.data(), prompt.size() * 4);
  size_t wrote = 0;
  const size_t at = 16 + prompt.size() * 4;
  const rlm_status st = rlm_session_save(s, &b[at], need, &wrote);
  if (st != RLM_OK) {
    fprintf(stderr, "ringlm: --prompt-cache %s: not saved (%s: %s)\n", path.c_str(),
            rlm_status_string(st), rlm_session_error(s));
    return;
  }
  b.resize(at + wrote);
  const std::string tmp = path + ".tmp-" + std::to_string(getpid());
  {
    std::ofstream o(tmp, std::ios::binary | std::ios::trunc);
    o.write(b.data(), static_cast<std::streamsize>(b.size()));
    if (!o) {
      fprintf(stderr, "ringlm: --prompt-cache %s: cannot write %s\n", path.c_str(), tmp.c_str());
      unlink(tmp.c_str());
      return;
    }
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    fprintf(stderr, "ringlm: --prompt-cache %s: cannot replace it\n", path.c_str());
    unlink(tmp.c_str());
  }
}
