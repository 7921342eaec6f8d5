#include "cli_common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char kSessionFlagsHelp[] =
    "      --temp T            temperature; 0 = greedy (default 0.8)\n"
    "      --top-k K           top-k, 0 = off (default 40)\n"
    "      --top-p P           top-p, 1 = off (default 0.95)\n"
    "      --min-p P           min-p, 0 = off (default 0.05)\n"
    "      --repeat-penalty R  repetition penalty, 1 = off (default 1)\n"
    "      --repeat-last-n N   tokens the penalties look back over (default 64)\n"
    "      --logit-bias ID=B   add B to token ID's logit (repeatable; -inf bans)\n"
    "      --seed S            sampler seed (default 24301)\n"
    "      --ctx N             KV ring slots (default: the model's context)\n"
    "      --sinks N           attention-sink positions kept when the ring wraps (default 4)\n"
    "      --kv f32|f16        KV cache precision (default f32)\n"
    "      --threads N         threads (default 1)\n"
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

bool parse_f32(const char* s, float* out) {
  char* end = nullptr;
  float v = strtof(s, &end);
  if (!*s || *end) return false;
  *out = v;
  return true;
}

bool parse_session_flag(const char* verb, int argc, char** argv, int* i, SessionFlags* f,
                        bool* handled) {
  const std::string a = argv[*i];
  static const char* const kWithValue[] = {"--temp",  "--top-k",       "--top-p",
                                           "--min-p", "--repeat-penalty", "--repeat-last-n",
                                           "--seed",  "--ctx",         "--sinks",
                                           "--kv",    "--threads",     "--logit-bias",
                                           "--backend"};
  *handled = false;
  bool known = false;
  for (const char* k : kWithValue) known |= a == k;
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
  if (a == "--temp") {
    ok = parse_f32(v, &sp.temperature);
  } else if (a == "--top-k") {
    ok = parse_u32(v, &u) && u <= 0x7fffffffu;
    sp.top_k = static_cast<int32_t>(u);
  } else if (a == "--top-p") {
    ok = parse_f32(v, &sp.top_p);
  } else if (a == "--min-p") {
    ok = parse_f32(v, &sp.min_p);
  } else if (a == "--repeat-penalty") {
    ok = parse_f32(v, &sp.repeat_penalty);
  } else if (a == "--repeat-last-n") {
    ok = parse_u32(v, &u) && u <= 65536;
    sp.penalty_last_n = static_cast<int32_t>(u);
    if (ok && u > cfg.penalty_window) cfg.penalty_window = u;
  } else if (a == "--seed") {
    char* end = nullptr;
    sp.seed = strtoull(v, &end, 10);
    ok = *v && !*end;
  } else if (a == "--ctx") {
    ok = parse_u32(v, &cfg.n_ctx);
  } else if (a == "--sinks") {
    ok = parse_u32(v, &cfg.n_sink);
  } else if (a == "--kv") {
    if (!strcmp(v, "f32")) cfg.kv_dtype = RLM_KV_F32;
    else if (!strcmp(v, "f16")) cfg.kv_dtype = RLM_KV_F16;
    else ok = false;
  } else if (a == "--threads") {
    ok = parse_u32(v, &cfg.n_threads);
  } else if (a == "--backend") {
    // argv outlives the config.
    ok = !strcmp(v, "native") || !strcmp(v, "xnnpack");
    cfg.backend = v;
  } else if (a == "--logit-bias") {
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
  if (!f->logit_bias.empty()) {
    f->sampling.logit_bias = f->logit_bias.data();
    f->sampling.n_logit_bias = static_cast<uint32_t>(f->logit_bias.size());
    if (f->config.max_logit_bias < f->sampling.n_logit_bias) {
      f->config.max_logit_bias = f->sampling.n_logit_bias;
    }
  }
}
