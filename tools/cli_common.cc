#include "cli_common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <random>
#include <vector>

const char kSessionFlagsHelp[] =
    "      --temp T            temperature; 0 = greedy (default 0.8)\n"
    "      --top-k K           top-k, 0 = off (default 40)\n"
    "      --top-p P           top-p, 1 = off (default 0.95)\n"
    "      --min-p P           min-p, 0 = off (default 0.05)\n"
    "      --repeat-penalty R  repetition penalty, 1 = off (default 1)\n"
    "      --repeat-last-n N   tokens the penalties look back over (default 64)\n"
    "      --logit-bias ID=B   add B to token ID's logit (repeatable; -inf bans)\n"
    "      --dry-multiplier M  DRY repetition penalty strength, 0 = off (default 0)\n"
    "      --dry-base B        DRY base, >= 1 (default 1.75)\n"
    "      --dry-allowed-length N  repeats up to N tokens go unpenalised (default 2)\n"
    "      --dry-penalty-last-n N  tokens DRY looks back over; -1 = the penalty window\n"
    "                          (default -1), 0 = off\n"
    "      --dry-sequence-breaker S  a string that ends a repeat (repeatable; replaces the\n"
    "                          defaults \\n : \" *; 'none' = no breakers; \\n \\t \\\\ unescaped)\n"
    "      --typical P         locally typical sampling, 1 = off (default 1)\n"
    "      --top-nsigma N      keep logits >= max - N * sigma; <= 0 = off (default off)\n"
    "      --xtc-probability P XTC: chance to drop the top choices, 0 = off (default 0)\n"
    "      --xtc-threshold T   XTC: the p a top choice needs (default 0.1)\n"
    "      --mirostat N        2 = Mirostat v2 (replaces top-k/top-p/min-p/typical/XTC),\n"
    "                          0 = off (default 0); v1 is not supported\n"
    "      --mirostat-ent TAU  Mirostat target entropy (default 5)\n"
    "      --mirostat-lr ETA   Mirostat learning rate (default 0.1)\n"
    "  -s, --seed S            sampler seed, 0..2^64-1 (default 24301); -1 = a random seed,\n"
    "                          printed on stderr\n"
    "  -c, --ctx, --ctx-size N KV ring slots (default: the model's context)\n"
    "      --sinks N           attention-sink positions kept when the ring wraps (default 4;\n"
    "                          must be below --ctx)\n"
    "      --kv f32|f16|q8     KV cache precision (default f16; q8: int8 with a scale per head\n"
    "                          and position, about half of f16's memory)\n"
    "  -t, --threads N         threads, 1..64 (default 1)\n"
    "      --backend NAME      native (default): every matmul on this CPU's kernels; xnnpack:\n"
    "                          f32 weight matrices on XNNPACK (builds that have it; the session\n"
    "                          then holds XNNPACK's packed copy of them)\n";

bool parse_u32(const char* s, uint32_t* out) {
  char* end = nullptr;
  errno = 0;
  unsigned long v = strtoul(s, &end, 10);
  if (!*s || *end || errno || v > 0xffffffffUL || s[0] == '-') return false;
  *out = static_cast<uint32_t>(v);
  return true;
}

double now_s() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

bool read_text_input(const std::string& path, size_t max_bytes, std::string* out,
                     std::string* err) {
  const bool is_stdin = path == "-";
  const std::string name = is_stdin ? std::string("standard input") : "'" + path + "'";
  // stat before open: opening a FIFO would block, a device (/dev/zero) never ends.
  struct stat st;
  if (!is_stdin && stat(path.c_str(), &st) != 0) {
    *err = "cannot open '" + path + "': " + strerror(errno);
    return false;
  }
  if (!is_stdin && !S_ISREG(st.st_mode)) {
    *err = "'" + path + "' is not a regular file";
    return false;
  }
  FILE* f = is_stdin ? stdin : fopen(path.c_str(), "rb");
  if (!f) {
    *err = "cannot open '" + path + "': " + strerror(errno);
    return false;
  }
  out->clear();
  std::vector<char> buf(1 << 16);
  bool too_big = false;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), f)) > 0) {
    if (out->size() + n > max_bytes) {
      too_big = true;
      break;
    }
    out->append(buf.data(), n);
  }
  const bool read_error = !too_big && ferror(f);
  if (!is_stdin) fclose(f);
  if (too_big) {
    *err = name + " is larger than " + std::to_string(max_bytes) + " bytes";
    return false;
  }
  if (read_error) {
    *err = "cannot read " + name;
    return false;
  }
  return true;
}

bool tokenize_text(const rlm_model* model, const std::string& text, uint32_t flags,
                   std::vector<int32_t>* out, std::string* err) {
  const size_t scratch_bytes = rlm_tokenize_scratch_bytes(model, text.size());
  if (scratch_bytes == 0 || scratch_bytes == SIZE_MAX) {
    *err = "text of " + std::to_string(text.size()) + " bytes is too long to tokenize";
    return false;
  }
  std::vector<uint64_t> scratch((scratch_bytes + 7) / 8);  // 8-aligned
  out->resize(text.size() + 8);
  size_t n = 0;
  rlm_status st = RLM_ERR_CAPACITY;
  for (int attempt = 0; attempt < 2 && st == RLM_ERR_CAPACITY; ++attempt) {
    if (attempt == 1) out->resize(n);  // the count the first call reported
    st = rlm_tokenize_ex(model, text.data(), text.size(), flags, out->data(), out->size(), &n,
                         scratch.data(), scratch.size() * 8);
  }
  if (st != RLM_OK) {
    *err = std::string("tokenize: ") + rlm_status_string(st);
    return false;
  }
  out->resize(n);
  return true;
}

bool parse_kv_dtype(const char* s, rlm_kv_dtype* out) {
  if (!strcmp(s, "f32")) *out = RLM_KV_F32;
  else if (!strcmp(s, "f16")) *out = RLM_KV_F16;
  else if (!strcmp(s, "q8")) *out = RLM_KV_Q8;
  else return false;
  return true;
}

const char* kv_dtype_name(rlm_kv_dtype dtype) {
  switch (dtype) {
    case RLM_KV_F16: return "f16";
    case RLM_KV_Q8: return "q8";
    default: return "f32";
  }
}

bool parse_f32(const char* s, float* out) {
  char* end = nullptr;
  float v = strtof(s, &end);
  if (!*s || *end) return false;
  *out = v;
  return true;
}

bool parse_seed(const char* s, uint64_t* out, bool* random) {
  *random = false;
  if (!strcmp(s, "-1")) {
    // A fresh seed per run, as llama.cpp's -1 (LLAMA_DEFAULT_SEED) does.
    std::random_device rd;
    *out = (static_cast<uint64_t>(rd()) << 32) ^ rd();
    *random = true;
    return true;
  }
  if (*s < '0' || *s > '9') return false;  // strtoull would take "-5" as 2^64 - 5
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = strtoull(s, &end, 10);
  if (*end || errno == ERANGE) return false;
  *out = v;
  return true;
}

bool parse_n_predict(const char* s, uint32_t* out) {
  if (!strcmp(s, "-1")) {
    *out = 0;
    return true;
  }
  return parse_u32(s, out);
}

bool check_session_flags(const char* verb, const rlm_model* model,
                         const rlm_session_config& cfg) {
  rlm_model_info info;
  rlm_model_info_default(&info);
  if (rlm_model_get_info(model, &info) != RLM_OK) return true;
  const uint32_t ctx = cfg.n_ctx ? cfg.n_ctx : info.max_context;
  const char* ctx_from = cfg.n_ctx ? "--ctx" : "the model's context";
  if (ctx < 2) {
    fprintf(stderr, "ringlm %s: --ctx %u: the KV ring needs at least 2 slots\n", verb, ctx);
    return false;
  }
  if (cfg.n_sink >= ctx) {
    fprintf(stderr, "ringlm %s: --sinks %u must be less than %s (%u); lower --sinks or raise --ctx\n",
            verb, cfg.n_sink, ctx_from, ctx);
    return false;
  }
  if (cfg.n_threads < 1 || cfg.n_threads > 64) {
    fprintf(stderr, "ringlm %s: --threads %u out of [1, 64]\n", verb, cfg.n_threads);
    return false;
  }
  return true;
}

bool parse_session_flag(const char* verb, int argc, char** argv, int* i, SessionFlags* f,
                        bool* handled) {
  const std::string a = argv[*i];
  static const char* const kWithValue[] = {"--temp",  "--top-k",       "--top-p",
                                           "--min-p", "--repeat-penalty", "--repeat-last-n",
                                           "--seed",  "--ctx",         "--sinks",
                                           "--kv",    "--threads",     "--logit-bias",
                                           "--backend",
                                           "--dry-multiplier", "--dry-base",
                                           "--dry-allowed-length", "--dry-penalty-last-n",
                                           "--dry-sequence-breaker", "--typical",
                                           "--top-nsigma", "--xtc-probability",
                                           "--xtc-threshold", "--mirostat", "--mirostat-ent",
                                           "--mirostat-lr"};
  // llama.cpp's spellings, accepted as aliases of ours.
  static const char* const kAliases[][2] = {
      {"-s", "--seed"}, {"-c", "--ctx"}, {"--ctx-size", "--ctx"}, {"-t", "--threads"}};
  *handled = false;
  bool known = false;
  for (const char* k : kWithValue) known |= a == k;
  std::string canon = a;
  for (const auto& al : kAliases) {
    if (a == al[0]) {
      canon = al[1];
      known = true;
    }
  }
  if (!known) return true;
  *handled = true;
  if (*i + 1 >= argc) {
    fprintf(stderr, "ringlm %s: %s needs a value\n", verb, a.c_str());
    return false;
  }
  const char* v = argv[++*i];
  rlm_sampling& sp = f->sampling;
  rlm_session_config& cfg = f->config;
  bool ok = true;
  uint32_t u = 0;
  if (canon == "--temp") {
    ok = parse_f32(v, &sp.temperature);
  } else if (canon == "--top-k") {
    ok = parse_u32(v, &u) && u <= 0x7fffffffu;
    sp.top_k = static_cast<int32_t>(u);
  } else if (canon == "--top-p") {
    ok = parse_f32(v, &sp.top_p);
  } else if (canon == "--min-p") {
    ok = parse_f32(v, &sp.min_p);
  } else if (canon == "--repeat-penalty") {
    ok = parse_f32(v, &sp.repeat_penalty);
  } else if (canon == "--repeat-last-n") {
    ok = parse_u32(v, &u) && u <= 65536;
    sp.penalty_last_n = static_cast<int32_t>(u);
    if (ok && u > cfg.penalty_window) cfg.penalty_window = u;
  } else if (canon == "--seed") {
    bool random = false;
    ok = parse_seed(v, &sp.seed, &random);
    if (ok && random) fprintf(stderr, "ringlm %s: random seed %llu\n", verb,
                              static_cast<unsigned long long>(sp.seed));
  } else if (canon == "--ctx") {
    ok = parse_u32(v, &cfg.n_ctx);
  } else if (canon == "--sinks") {
    ok = parse_u32(v, &cfg.n_sink);
  } else if (canon == "--kv") {
    ok = parse_kv_dtype(v, &cfg.kv_dtype);
  } else if (canon == "--threads") {
    ok = parse_u32(v, &cfg.n_threads);
  } else if (canon == "--backend") {
    // argv outlives the config.
    ok = !strcmp(v, "native") || !strcmp(v, "xnnpack");
    cfg.backend = v;
  } else if (canon == "--dry-multiplier") {
    ok = parse_f32(v, &sp.dry_multiplier);
  } else if (canon == "--dry-base") {
    ok = parse_f32(v, &sp.dry_base);
  } else if (canon == "--dry-allowed-length") {
    ok = parse_u32(v, &u) && u <= 0x7fffffffu;
    sp.dry_allowed_length = static_cast<int32_t>(u);
  } else if (canon == "--dry-penalty-last-n") {
    if (!strcmp(v, "-1")) {
      sp.dry_penalty_last_n = -1;
    } else {
      ok = parse_u32(v, &u) && u <= 65536;
      sp.dry_penalty_last_n = static_cast<int32_t>(u);
      if (ok && u > cfg.penalty_window) cfg.penalty_window = u;
    }
  } else if (canon == "--dry-sequence-breaker") {
    if (!f->dry_breakers_given) f->dry_breakers.clear();
    f->dry_breakers_given = true;
    if (!strcmp(v, "none")) {
      f->dry_breakers.clear();
    } else {
      std::string b;
      for (const char* c = v; *c; ++c) {
        if (*c == '\\' && c[1]) {
          ++c;
          b += *c == 'n' ? '\n' : *c == 't' ? '\t' : *c == 'r' ? '\r' : *c;
        } else {
          b += *c;
        }
      }
      ok = !b.empty();
      if (ok) f->dry_breakers.push_back(b);
    }
  } else if (canon == "--typical") {
    ok = parse_f32(v, &sp.typical_p);
  } else if (canon == "--top-nsigma") {
    ok = parse_f32(v, &sp.top_n_sigma);
    if (ok && sp.top_n_sigma < 0.0f) sp.top_n_sigma = 0.0f;  // llama.cpp's -1: off
  } else if (canon == "--xtc-probability") {
    ok = parse_f32(v, &sp.xtc_probability);
  } else if (canon == "--xtc-threshold") {
    ok = parse_f32(v, &sp.xtc_threshold);
  } else if (canon == "--mirostat") {
    if (!strcmp(v, "1")) {
      fprintf(stderr, "ringlm %s: --mirostat 1 (Mirostat v1) is not supported; use --mirostat 2\n",
              verb);
      return false;
    }
    ok = !strcmp(v, "0") || !strcmp(v, "2");
    sp.mirostat = ok ? v[0] - '0' : 0;
  } else if (canon == "--mirostat-ent") {
    ok = parse_f32(v, &sp.mirostat_tau);
  } else if (canon == "--mirostat-lr") {
    ok = parse_f32(v, &sp.mirostat_eta);
  } else if (canon == "--logit-bias") {
    const char* eq = strchr(v, '=');
    char* end = nullptr;
    rlm_logit_bias b{0, 0.0f};
    if (eq) {
      long id = strtol(v, &end, 10);
      ok = end == eq && id >= 0 && id <= 0x7fffffffL;
      b.token = static_cast<int32_t>(id);
      ok = ok && parse_f32(eq + 1, &b.bias);
    } else {
      ok = false;
    }
    if (ok) f->logit_bias.push_back(b);
  }
  if (!ok) fprintf(stderr, "ringlm %s: bad value '%s' for %s\n", verb, v, a.c_str());
  return ok;
}

void finish_session_flags(SessionFlags* f) {
  if (f->dry_breakers_given) {
    f->dry_breaker_ptrs.clear();
    for (const std::string& b : f->dry_breakers) f->dry_breaker_ptrs.push_back(b.c_str());
    f->sampling.dry_sequence_breakers =
        f->dry_breaker_ptrs.empty() ? nullptr : f->dry_breaker_ptrs.data();
    f->sampling.n_dry_sequence_breakers = static_cast<uint32_t>(f->dry_breaker_ptrs.size());
  }
  if (!f->logit_bias.empty()) {
    f->sampling.logit_bias = f->logit_bias.data();
    f->sampling.n_logit_bias = static_cast<uint32_t>(f->logit_bias.size());
    if (f->config.max_logit_bias < f->sampling.n_logit_bias) {
      f->config.max_logit_bias = f->sampling.n_logit_bias;
    }
  }
}

bool CliSession::open(const char* verb, const rlm_model* model, const rlm_session_config& config,
                      const rlm_sampling* sampling) {
  close();
  size_t bytes = 0, align = 0;
  rlm_status st = rlm_session_memory(model, &config, &bytes, &align);
  if (st != RLM_OK) {
    char why[256];
    rlm_session_config_check(model, &config, why, sizeof why);
    fprintf(stderr, "ringlm %s: session config: %s%s%s\n", verb, rlm_status_string(st),
            *why ? ": " : "", why);
    return false;
  }
  void* mem = aligned_alloc(align, (bytes + align - 1) / align * align);
  if (!mem) {
    fprintf(stderr, "ringlm %s: cannot allocate %zu bytes for the session\n", verb, bytes);
    return false;
  }
  rlm_session* s = nullptr;
  if ((st = rlm_session_init(model, &config, mem, bytes, &s)) != RLM_OK) {
    fprintf(stderr, "ringlm %s: session: %s\n", verb, rlm_status_string(st));
    free(mem);
    return false;
  }
  s_ = s;
  mem_ = mem;
  bytes_ = bytes;
  if (sampling && (st = rlm_session_set_sampling(s, sampling)) != RLM_OK) {
    fprintf(stderr, "ringlm %s: sampling: %s: %s\n", verb, rlm_status_string(st),
            rlm_session_error(s));
    close();
    return false;
  }
  return true;
}

void CliSession::close() {
  if (s_) rlm_session_release(s_);
  free(mem_);
  s_ = nullptr;
  mem_ = nullptr;
  bytes_ = 0;
}
