// Helpers shared by the fuzz targets: input slicing, in-memory files for the readers, tiny models.
//
// Every target defines LLVMFuzzerTestOneInput (and maybe LLVMFuzzerInitialize). Built with
// -fsanitize=fuzzer (preset fuzz, clang) they are libFuzzer binaries; otherwise replay_main.cc
// supplies main() and runs the function over files (fuzz/regressions/<target>/, seed corpora).
// A target calls FUZZ_CHECK for properties: a failure prints the condition and aborts, which
// libFuzzer records as a crash (and the replay binary as a failed test).
#ifndef RINGLM_FUZZ_FUZZ_COMMON_H_
#define RINGLM_FUZZ_FUZZ_COMMON_H_

#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "ringlm/ringlm.h"

#define FUZZ_CHECK(cond, ...)                                                   \
  do {                                                                          \
    if (!(cond)) {                                                              \
      fprintf(stderr, "FUZZ_CHECK failed at %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                             \
      fprintf(stderr, "\n");                                                    \
      abort();                                                                  \
    }                                                                           \
  } while (0)

namespace ringlm_fuzz {

// Reads the input front to back; past the end every read returns zeros / empty.
class Reader {
 public:
  Reader(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  size_t remaining() const { return n_ - pos_; }
  bool empty() const { return pos_ >= n_; }
  uint8_t u8() { return pos_ < n_ ? p_[pos_++] : 0; }
  uint16_t u16() { return static_cast<uint16_t>(u8() | (u8() << 8)); }
  uint32_t u32() { return static_cast<uint32_t>(u16()) | (static_cast<uint32_t>(u16()) << 16); }
  uint64_t u64() { return static_cast<uint64_t>(u32()) | (static_cast<uint64_t>(u32()) << 32); }
  float f32() {
    uint32_t b = u32();
    float f;
    memcpy(&f, &b, 4);
    return f;
  }
  // Value in [lo, hi] from one or two bytes.
  uint32_t range(uint32_t lo, uint32_t hi) {
    const uint32_t span = hi - lo + 1;
    const uint32_t v = span <= 256 ? u8() : u16();
    return lo + v % span;
  }
  // Up to max_len bytes (length from one byte).
  std::string bytes(size_t max_len) {
    size_t len = u8();
    if (len > max_len) len = len % (max_len + 1);
    if (len > remaining()) len = remaining();
    std::string s(reinterpret_cast<const char*>(p_ + pos_), len);
    pos_ += len;
    return s;
  }
  std::string rest() {
    std::string s(reinterpret_cast<const char*>(p_ + pos_), n_ - pos_);
    pos_ = n_;
    return s;
  }

 private:
  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0;
};

// Splits `data` at every occurrence of `sep` (the file separator of multi-file targets).
inline std::vector<std::string> split_sections(const uint8_t* data, size_t size,
                                               const std::string& sep) {
  std::vector<std::string> out;
  std::string all(reinterpret_cast<const char*>(data), size);
  size_t start = 0;
  for (;;) {
    size_t at = all.find(sep, start);
    if (at == std::string::npos) {
      out.push_back(all.substr(start));
      return out;
    }
    out.push_back(all.substr(start, at - start));
    start = at + sep.size();
  }
}

// Joins sections with the separator (seed writers).
inline std::string join_sections(const std::vector<std::string>& parts, const std::string& sep) {
  std::string s;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) s += sep;
    s += parts[i];
  }
  return s;
}

// Separator between the files of one input (HF directory, llama2.c checkpoint + tokenizer).
inline const std::string& file_separator() {
  static const std::string sep("\n--ringlm-fuzz-file--\n");
  return sep;
}

// A 64-byte-aligned copy of the input (model bytes must be aligned).
class Aligned {
 public:
  void assign(const void* p, size_t n) {
    buf_.assign(n / 8 + 16, 0);
    uintptr_t a = reinterpret_cast<uintptr_t>(buf_.data());
    off_ = static_cast<size_t>((64 - a % 64) % 64);
    size_ = n;
    if (n) memcpy(data(), p, n);
  }
  void resize_fill(size_t n, uint8_t fill) {
    buf_.assign(n / 8 + 16, 0);
    uintptr_t a = reinterpret_cast<uintptr_t>(buf_.data());
    off_ = static_cast<size_t>((64 - a % 64) % 64);
    size_ = n;
    memset(data(), fill, n);
  }
  uint8_t* data() { return reinterpret_cast<uint8_t*>(buf_.data()) + off_; }
  size_t size() const { return size_; }

 private:
  std::vector<uint64_t> buf_;
  size_t off_ = 0;
  size_t size_ = 0;
};

// A per-process scratch directory (tmpfs when /dev/shm exists) for the readers, which take
// paths. Files are rewritten for every input; nothing is left behind on a clean exit.
inline const std::string& scratch_dir() {
  static std::string dir = [] {
    const char* base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    std::string tmpl = std::string(base) + "/ringlm-fuzz-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    const char* d = mkdtemp(buf.data());
    if (!d) {
      perror("mkdtemp");
      abort();
    }
    std::string s(d);
    static std::string* keep = new std::string(s);  // removed at exit
    atexit([] {
      std::string cmd = "rm -rf '" + *keep + "'";
      if (system(cmd.c_str()) != 0) {
      }
    });
    return s;
  }();
  return dir;
}

inline bool write_file(const std::string& path, const std::string& data) {
  FILE* f = fopen(path.c_str(), "wb");
  if (!f) return false;
  const bool ok = fwrite(data.data(), 1, data.size(), f) == data.size();
  return fclose(f) == 0 && ok;
}

inline bool read_whole_file(const std::string& path, std::string* out) {
  FILE* f = fopen(path.c_str(), "rb");
  if (!f) return false;
  out->clear();
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out->append(buf, n);
  fclose(f);
  return true;
}

// The shared test-data directory ($RINGLM_SHARED_DIR, else the configure-time default), or "".
inline std::string shared_dir() {
  const char* env = getenv("RINGLM_SHARED_DIR");
  std::string d = env && *env ? env : RINGLM_SHARED_DIR_DEFAULT;
  struct stat st;
  if (stat(d.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return "";
  return d;
}

// Whether `s` is well-formed UTF-8 (no overlongs, surrogates or values above U+10FFFF).
inline bool valid_utf8(const char* s, size_t n) {
  const uint8_t* p = reinterpret_cast<const uint8_t*>(s);
  size_t i = 0;
  while (i < n) {
    const uint8_t b = p[i];
    size_t len;
    uint8_t lo = 0x80, hi = 0xBF;
    if (b < 0x80) {
      ++i;
      continue;
    } else if (b >= 0xC2 && b <= 0xDF) {
      len = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
      len = 3;
      if (b == 0xE0) lo = 0xA0;
      if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
      len = 4;
      if (b == 0xF0) lo = 0x90;
      if (b == 0xF4) hi = 0x8F;
    } else {
      return false;
    }
    if (i + len > n) return false;
    if (p[i + 1] < lo || p[i + 1] > hi) return false;
    for (size_t k = 2; k < len; ++k) {
      if (p[i + k] < 0x80 || p[i + k] > 0xBF) return false;
    }
    i += len;
  }
  return true;
}

// Runs rlm_model_open on model bytes and, when it verifies, exercises everything that reads the
// model: info, tokenizer calls over every token, and a small session stepping over `ids`.
// Returns the open status. Shared by the model and converter targets (a converted model must be
// as safe to run as any other).
inline rlm_status exercise_model(const uint8_t* bytes, size_t size, const std::vector<int32_t>& ids,
                                 uint32_t steps, std::string* error = nullptr) {
  rlm_model model;
  const rlm_status st = rlm_model_open(bytes, size, &model);
  const char* msg = rlm_model_error(&model);
  FUZZ_CHECK(msg != nullptr, "null error message");
  if (error) *error = msg;
  if (st != RLM_OK) {
    FUZZ_CHECK(msg[0] != '\0', "open failed (%s) without a message", rlm_status_string(st));
    // A failed open must leave the storage unusable for every call.
    rlm_model_info info;
    rlm_model_info_default(&info);
    FUZZ_CHECK(rlm_model_get_info(&model, &info) == RLM_ERR_INVALID_ARGUMENT, "info on failed");
    return st;
  }
  rlm_model_info info;
  rlm_model_info_default(&info);
  FUZZ_CHECK(rlm_model_get_info(&model, &info) == RLM_OK, "info");
  const uint32_t vocab = info.vocab_size;
  FUZZ_CHECK(vocab >= 1, "vocab 0");

  // Tokenizer surface: every piece (bounded), lookups of them, a text round. A piece may be up
  // to 65,535 bytes (the verifier's bound): a short buffer must get RLM_ERR_CAPACITY and the
  // size needed, and a buffer of that size must then take the piece.
  char piece[512];
  static std::vector<char> big_piece(65536);
  const uint32_t n_check = vocab < 4096 ? vocab : 4096;
  for (uint32_t t = 0; t < n_check; ++t) {
    size_t n = 0;
    const rlm_status ps = rlm_token_to_bytes(&model, static_cast<int32_t>(t), piece, sizeof piece, &n);
    FUZZ_CHECK(ps == RLM_OK || ps == RLM_ERR_CAPACITY, "token_to_bytes %u: %s", t,
               rlm_status_string(ps));
    if (ps == RLM_OK) {
      FUZZ_CHECK(n <= sizeof piece, "token_to_bytes %u: %zu bytes", t, n);
    } else {
      FUZZ_CHECK(n > sizeof piece && n <= big_piece.size(), "token_to_bytes %u needs %zu", t, n);
      size_t n2 = 0;
      FUZZ_CHECK(rlm_token_to_bytes(&model, static_cast<int32_t>(t), big_piece.data(), n, &n2) ==
                         RLM_OK && n2 == n,
                 "token_to_bytes %u with the size it asked for", t);
    }
    (void)rlm_token_is_end(&model, static_cast<int32_t>(t));
  }
  {
    size_t n = 0;
    FUZZ_CHECK(rlm_token_to_bytes(&model, static_cast<int32_t>(vocab), piece, sizeof piece, &n) ==
                   RLM_ERR_TOKEN_OUT_OF_RANGE,
               "token_to_bytes(vocab)");
    int32_t id = -1;
    const rlm_status ls = rlm_token_lookup(&model, "a", 1, &id);
    FUZZ_CHECK(ls == RLM_OK || ls == RLM_ERR_NOT_FOUND, "lookup");
    if (ls == RLM_OK) FUZZ_CHECK(id >= 0 && static_cast<uint32_t>(id) < vocab, "lookup id");
    const char* tmpl = nullptr;
    size_t tlen = 0;
    const rlm_status cs = rlm_model_chat_template(&model, &tmpl, &tlen);
    FUZZ_CHECK(cs == RLM_OK || cs == RLM_ERR_NOT_FOUND, "chat template");
    if (cs == RLM_OK) FUZZ_CHECK(tmpl >= reinterpret_cast<const char*>(bytes) &&
                                     tmpl + tlen <= reinterpret_cast<const char*>(bytes) + size,
                                 "chat template outside the model");
  }
  {
    static const char kText[] = "Once upon a time, \xc3\xa9\xe2\x96\x81 <s> \xff\xfe 123 it's";
    const size_t len = sizeof kText - 1;
    std::vector<uint8_t> scratch(rlm_tokenize_scratch_bytes(&model, len) + 8);
    std::vector<int32_t> toks(len + 8);
    void* sp = scratch.data() + ((8 - reinterpret_cast<uintptr_t>(scratch.data()) % 8) % 8);
    size_t n = 0;
    const rlm_status ts = rlm_tokenize(&model, kText, len, 1, toks.data(), toks.size(), &n, sp,
                                       scratch.size() - 8);
    FUZZ_CHECK(ts == RLM_OK || ts == RLM_ERR_CAPACITY, "tokenize: %s", rlm_status_string(ts));
    if (ts == RLM_OK) {
      for (size_t i = 0; i < n; ++i) FUZZ_CHECK(toks[i] >= 0 && static_cast<uint32_t>(toks[i]) < vocab, "tok id");
    }
  }

  // A small session. Skip configurations whose memory would be absurd for a fuzz input.
  rlm_session_config cfg;
  rlm_session_config_default(&cfg);
  cfg.n_ctx = 8;
  cfg.n_sink = 2;
  cfg.n_batch = 3;
  cfg.max_pending = 16;
  cfg.max_text_bytes = 64;
  size_t need = 0, align = 0;
  const rlm_status ms = rlm_session_memory(&model, &cfg, &need, &align);
  if (ms != RLM_OK) {
    // Only a config the model cannot honour (max_logit_bias above a tiny vocab) may fail.
    FUZZ_CHECK(ms == RLM_ERR_INVALID_ARGUMENT, "session_memory: %s", rlm_status_string(ms));
    cfg.max_logit_bias = 0;
    FUZZ_CHECK(rlm_session_memory(&model, &cfg, &need, &align) == RLM_OK, "session_memory 2");
  }
  FUZZ_CHECK(align == 64, "alignment %zu", align);
  if (need > (256u << 20)) return st;
  Aligned mem;
  mem.resize_fill(need, 0xA5);
  rlm_session* s = nullptr;
  const rlm_status is = rlm_session_init(&model, &cfg, mem.data(), need, &s);
  FUZZ_CHECK(is == RLM_OK && s != nullptr, "init: %s", rlm_status_string(is));
  std::vector<int32_t> in;
  for (int32_t id : ids) in.push_back(static_cast<int32_t>(static_cast<uint32_t>(id) % vocab));
  if (in.empty()) in.push_back(0);
  if (in.size() > 16) in.resize(16);
  FUZZ_CHECK(rlm_session_feed_tokens(s, in.data(), in.size()) == RLM_OK, "feed");
  rlm_session_set_ignore_eos(s, 1);
  rlm_step_result r;
  rlm_step_result_default(&r);
  for (uint32_t i = 0; i < steps; ++i) {
    const rlm_status ss = rlm_step(s, &r);
    // Weights with NaN / Inf (the runtime does not scan weight values) can make every logit
    // NaN: nothing to sample, a named status since issue #12.
    if (ss == RLM_ERR_NO_CANDIDATES) break;
    FUZZ_CHECK(ss == RLM_OK, "step %u: %s %s", i, rlm_status_string(ss), rlm_session_error(s));
    FUZZ_CHECK(r.token >= 0 && static_cast<uint32_t>(r.token) < vocab, "sampled token %d", r.token);
    FUZZ_CHECK(r.text_len == 0 || valid_utf8(r.text, r.text_len), "step text not UTF-8");
  }
  static const char kFeed[] = "hi \xe2\x82\xac!";
  const rlm_status fs = rlm_session_feed_text(s, kFeed, sizeof kFeed - 1);
  FUZZ_CHECK(fs == RLM_OK || fs == RLM_ERR_CAPACITY, "feed_text: %s", rlm_status_string(fs));
  if (fs == RLM_OK) {
    const rlm_status es = rlm_session_eval(s);
    FUZZ_CHECK(es == RLM_OK, "eval: %s", rlm_status_string(es));
  }
  FUZZ_CHECK(rlm_session_release(s) == RLM_OK, "release");
  return st;
}

}  // namespace ringlm_fuzz

#endif  // RINGLM_FUZZ_FUZZ_COMMON_H_
