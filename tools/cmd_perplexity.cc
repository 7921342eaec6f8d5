// ringlm perplexity: perplexity of a model over a text, computed the way llama.cpp's perplexity
// tool does (so the figures compare directly), optionally with the KL divergence against a
// reference model on the same tokens, and with a ring smaller than the chunk.
//
// Method (llama.cpp tools/perplexity, perplexity() and perplexity_v2()):
//   - the text (one trailing '\n' dropped, as llama.cpp's -f does) is tokenized with BOS when the
//     model adds one;
//   - default: n_chunk = n_tokens / ctx non-overlapping chunks; each chunk runs from an empty
//     cache with its first token replaced by BOS, and only its second half is scored: the tokens
//     at j + 1 for j in [ctx / 2, ctx - 1) given everything before them in the chunk;
//   - --stride S: windows of ctx tokens starting every S tokens (first token BOS), each scoring
//     its last S tokens;
//   - PPL = exp(mean nll); its error is PPL * sqrt((mean nll² − mean nll²) / (count − 1)).
// The scored tokens run through rlm_session_score (batched passes, logits of every position).
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cli_common.h"
#include "commands.h"
#include "mapped_file.h"
#include "ringlm/ringlm.h"

namespace {

const char kUsage[] =
    "usage: ringlm perplexity -m MODEL -f TEXT [options]\n"
    "\n"
    "Perplexity of MODEL over TEXT, computed as llama.cpp's perplexity tool does: chunks of --ctx\n"
    "tokens, BOS first in each, the second half of each chunk scored. Prints the running value\n"
    "after each chunk, the final value +/- its standard error, and tokens/s.\n"
    "\n"
    "  -m, --model FILE        model file (.rlm)\n"
    "  -f, --file FILE         text ('-' = standard input), up to 64 MiB; one trailing newline is\n"
    "                          dropped (as llama.cpp's -f does)\n"
    "  -c, --ctx N             tokens per chunk (default 512, at most the model's context unless\n"
    "                          --ring is given); the text needs at least 2 * N tokens\n"
    "  -b, --batch N           positions per scoring pass (default min(N, 512))\n"
    "      --stride S          llama.cpp's --ppl-stride: windows of --ctx tokens every S tokens,\n"
    "                          each scoring its last S tokens (0 < S < --ctx; default: chunks)\n"
    "      --chunks K          score only the first K chunks (default all)\n"
    "      --kl-base BASE      also run BASE (e.g. the f32 file of the same model, same\n"
    "                          vocabulary) on the same tokens and report the KL divergence\n"
    "                          KL(BASE || MODEL), top-1 agreement, the PPL ratio and the\n"
    "                          statistics of dp = p_MODEL(token) - p_BASE(token)\n"
    "      --ring N            KV ring of N slots (default: --ctx): the chunk runs through a ring\n"
    "                          smaller than itself, keeping --sinks positions (ring eviction)\n"
    "      --sinks S           attention sinks with --ring (default 4)\n"
    "      --kv f32|f16|q8     KV cache precision (default f16)\n"
    "  -t, --threads N         threads, 1..64 (default 1)\n"
    "  -h, --help              this help\n";

int usage_error(const char* msg) {
  fprintf(stderr, "ringlm perplexity: %s\n%s", msg, kUsage);
  return 2;
}

// One model and a session on it sized for scoring `ctx` tokens in passes of `batch`.
struct Scorer {
  MappedFile file;
  rlm_model model;
  CliSession session;
  uint32_t vocab = 0;
  int32_t bos = -1;
  bool add_bos = false;

  bool open(const std::string& path, const rlm_session_config& cfg) {
    std::string err;
    if (!file.open(path, &err)) {
      fprintf(stderr, "ringlm perplexity: %s\n", err.c_str());
      return false;
    }
    const rlm_status st = rlm_model_open(file.data(), file.size(), &model);
    if (st != RLM_OK) {
      fprintf(stderr, "ringlm perplexity: %s: %s: %s\n", path.c_str(), rlm_status_string(st),
              rlm_model_error(&model));
      return false;
    }
    rlm_model_info info;
    rlm_model_info_default(&info);
    rlm_model_get_info(&model, &info);
    vocab = info.vocab_size;
    bos = info.bos_id;
    add_bos = info.add_bos != 0;  // llama.cpp: llama_vocab_get_add_bos
    if (!check_session_flags("perplexity", &model, cfg)) return false;
    return session.open("perplexity", &model, cfg, nullptr);
  }

  // Runs window[0, n) from an empty cache and scores window[first + 1, n): logprobs (and rows of
  // raw logits when `logits` is not null) of n - first - 1 tokens.
  bool score(const int32_t* window, uint32_t n, uint32_t first, float* logprobs, float* logits) {
    rlm_session* s = session.get();
    rlm_session_reset(s);
    rlm_status st = rlm_session_feed_tokens(s, window, first + 1);
    if (st == RLM_OK) st = rlm_session_score(s, window + first + 1, n - first - 1, logprobs, logits,
                                             nullptr);
    if (st != RLM_OK) {
      fprintf(stderr, "ringlm perplexity: score: %s: %s\n", rlm_status_string(st),
              rlm_session_error(s));
      return false;
    }
    return true;
  }
};

// log-softmax of one row into out (double), returning nothing; NaN-free rows assumed (raw model
// output; a NaN row makes every figure NaN, which is what it should report).
void log_softmax(const float* row, uint32_t n, std::vector<double>* out) {
  out->resize(n);
  double m = -INFINITY;
  for (uint32_t i = 0; i < n; ++i) m = std::max(m, static_cast<double>(row[i]));
  double sum = 0.0;
  for (uint32_t i = 0; i < n; ++i) sum += exp(static_cast<double>(row[i]) - m);
  const double lse = m + log(sum);
  for (uint32_t i = 0; i < n; ++i) (*out)[i] = static_cast<double>(row[i]) - lse;
}

uint32_t argmax(const float* row, uint32_t n) {
  uint32_t best = 0;
  for (uint32_t i = 1; i < n; ++i) {
    if (row[i] > row[best]) best = i;
  }
  return best;
}

// Mean and its standard error of accumulated sums.
struct Stat {
  double sum = 0, sum2 = 0;
  size_t n = 0;
  void add(double v) {
    sum += v;
    sum2 += v * v;
    ++n;
  }
  double mean() const { return n ? sum / n : NAN; }
  double err() const {
    if (n < 2) return NAN;
    const double m = mean();
    const double var = sum2 / n - m * m;
    return var > 0 ? sqrt(var / (n - 1)) : 0.0;
  }
};

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t i = static_cast<size_t>(q * (v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

}  // namespace

int cmd_perplexity(int argc, char** argv) {
  std::string model_path, text_path, base_path;
  uint32_t ctx = 512, batch = 0, stride = 0, chunks_max = 0, ring = 0, sinks = 4, threads = 1;
  rlm_kv_dtype kv = RLM_KV_F16;  // the runtime's default (and llama.cpp's)
  bool ctx_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    auto u32 = [&](uint32_t* out, uint32_t lo) -> bool {
      const char* v = value();
      if (!v) {
        fprintf(stderr, "ringlm perplexity: %s needs a value\n", a.c_str());
        return false;
      }
      if (!parse_u32(v, out) || *out < lo) {
        fprintf(stderr, "ringlm perplexity: bad value '%s' for %s (an integer >= %u)\n", v,
                a.c_str(), lo);
        return false;
      }
      return true;
    };
    if (a == "-h" || a == "--help") {
      fputs(kUsage, stdout);
      return 0;
    } else if (a == "-m" || a == "--model" || a == "-f" || a == "--file" || a == "--kl-base" ||
               a == "--kv") {
      const char* v = value();
      if (!v) {
        fprintf(stderr, "ringlm perplexity: %s needs a value\n", a.c_str());
        return 2;
      }
      if (a == "-m" || a == "--model") {
        model_path = v;
      } else if (a == "-f" || a == "--file") {
        text_path = v;
      } else if (a == "--kl-base") {
        base_path = v;
      } else if (!parse_kv_dtype(v, &kv)) {
        fprintf(stderr, "ringlm perplexity: bad value '%s' for --kv (f32, f16 or q8)\n", v);
        return 2;
      }
    } else if (a == "-c" || a == "--ctx" || a == "--ctx-size") {
      if (!u32(&ctx, 4)) return 2;
      ctx_given = true;
    } else if (a == "-b" || a == "--batch") {
      if (!u32(&batch, 1)) return 2;
    } else if (a == "--stride" || a == "--ppl-stride") {
      if (!u32(&stride, 1)) return 2;
    } else if (a == "--chunks") {
      if (!u32(&chunks_max, 1)) return 2;
    } else if (a == "--ring") {
      if (!u32(&ring, 2)) return 2;
    } else if (a == "--sinks") {
      if (!u32(&sinks, 0)) return 2;
    } else if (a == "-t" || a == "--threads") {
      if (!u32(&threads, 1)) return 2;
    } else {
      fprintf(stderr, "ringlm perplexity: unknown option '%s'\n%s", a.c_str(), kUsage);
      return 2;
    }
  }
  if (model_path.empty() || text_path.empty()) return usage_error("need -m MODEL and -f TEXT");
  if (stride && stride >= ctx) return usage_error("--stride must be below --ctx");
  if (ring && sinks >= ring) return usage_error("--sinks must be below --ring");
  if (batch == 0) batch = std::min<uint32_t>(ctx, 512);
  if (batch > 4096) return usage_error("--batch at most 4096");

  rlm_session_config cfg;
  rlm_session_config_default(&cfg);
  cfg.n_ctx = ring ? ring : ctx;
  cfg.n_sink = ring ? sinks : std::min<uint32_t>(4, ctx - 1);
  cfg.kv_dtype = kv;
  cfg.n_threads = threads;
  cfg.n_batch = batch;
  cfg.max_logit_rows = batch;
  cfg.max_pending = ctx;

  Scorer m;
  if (!m.open(model_path, cfg)) return 1;
  rlm_model_info info;
  rlm_model_info_default(&info);
  rlm_model_get_info(&m.model, &info);
  if (!ring && ctx > info.max_context) {
    if (ctx_given) {
      fprintf(stderr,
              "ringlm perplexity: --ctx %u above the model's context %u (use --ring to run "
              "longer chunks through a smaller ring)\n",
              ctx, info.max_context);
      return 2;
    }
    ctx = info.max_context;  // the default 512 on a smaller model
    cfg.n_ctx = ctx;
    cfg.max_pending = ctx;
    cfg.n_batch = cfg.max_logit_rows = batch = std::min(batch, ctx);
    m.session.close();
    if (!m.session.open("perplexity", &m.model, cfg, nullptr)) return 1;
  }
  Scorer base;
  const bool kl = !base_path.empty();
  if (kl) {
    if (!base.open(base_path, cfg)) return 1;
    if (base.vocab != m.vocab) {
      fprintf(stderr,
              "ringlm perplexity: --kl-base has %u tokens in its vocabulary, the model %u: KL "
              "needs the same vocabulary\n",
              base.vocab, m.vocab);
      return 1;
    }
  }

  std::string text, err;
  if (!read_text_input(text_path, kMaxTextFileBytes, &text, &err)) {
    fprintf(stderr, "ringlm perplexity: -f: %s\n", err.c_str());
    return 1;
  }
  if (!text.empty() && text.back() == '\n') text.pop_back();
  std::vector<int32_t> tokens;
  if (!tokenize_text(&m.model, text, m.add_bos ? RLM_TOKENIZE_ADD_BOS : 0u, &tokens, &err)) {
    fprintf(stderr, "ringlm perplexity: tokenize: %s\n", err.c_str());
    return 1;
  }
  const size_t n_tok = tokens.size();
  // Windows: (start, scored from `first`).
  const uint32_t first = stride ? ctx - stride - 1 : ctx / 2;
  size_t n_windows = 0;
  if (stride) {
    if (n_tok < ctx) {
      fprintf(stderr, "ringlm perplexity: %zu tokens: --stride needs at least --ctx = %u\n", n_tok,
              ctx);
      return 1;
    }
    n_windows = (n_tok - ctx + stride - 1) / stride;
    if (n_windows == 0) n_windows = 1;
  } else {
    if (n_tok < 2 * static_cast<size_t>(ctx)) {
      fprintf(stderr,
              "ringlm perplexity: the text has %zu tokens; %u chunks of --ctx %u need at least "
              "%u (as llama.cpp requires)\n",
              n_tok, 2, ctx, 2 * ctx);
      return 1;
    }
    n_windows = n_tok / ctx;
  }
  if (chunks_max && chunks_max < n_windows) n_windows = chunks_max;
  const uint32_t n_scored = ctx - first - 1;
  fprintf(stderr,
          "ringlm perplexity: %zu tokens, %zu %s of %u, scoring %u tokens of each%s%s\n", n_tok,
          n_windows, stride ? "windows" : "chunks", ctx, n_scored,
          ring ? " | ring " : "", ring ? (std::to_string(ring) + " slots + " +
                                           std::to_string(sinks) + " sinks").c_str()
                                        : "");

  std::vector<int32_t> window(ctx);
  std::vector<float> lp(n_scored), lp_base(n_scored);
  std::vector<float> rows, rows_base;
  if (kl) {
    rows.resize(static_cast<size_t>(n_scored) * m.vocab);
    rows_base.resize(rows.size());
  }
  Stat nll, nll_base, kld, dp;
  std::vector<double> kl_all;
  size_t top1_same = 0;
  std::vector<double> ls, ls_base;
  double t_model = 0;
  for (size_t w = 0; w < n_windows; ++w) {
    const size_t start = w * (stride ? stride : ctx);
    std::copy(tokens.begin() + start, tokens.begin() + start + ctx, window.begin());
    if (m.add_bos) window[0] = m.bos;
    const double t0 = now_s();
    if (!m.score(window.data(), ctx, first, lp.data(), kl ? rows.data() : nullptr)) return 1;
    t_model += now_s() - t0;
    if (kl && !base.score(window.data(), ctx, first, lp_base.data(), rows_base.data())) return 1;
    for (uint32_t j = 0; j < n_scored; ++j) {
      nll.add(-static_cast<double>(lp[j]));
      if (!kl) continue;
      nll_base.add(-static_cast<double>(lp_base[j]));
      const float* r = rows.data() + static_cast<size_t>(j) * m.vocab;
      const float* rb = rows_base.data() + static_cast<size_t>(j) * m.vocab;
      log_softmax(r, m.vocab, &ls);
      log_softmax(rb, m.vocab, &ls_base);
      double k = 0.0;
      for (uint32_t t = 0; t < m.vocab; ++t) {
        const double pb = exp(ls_base[t]);
        if (pb > 0) k += pb * (ls_base[t] - ls[t]);
      }
      kld.add(k);
      kl_all.push_back(k);
      top1_same += argmax(r, m.vocab) == argmax(rb, m.vocab);
      dp.add(exp(static_cast<double>(lp[j])) - exp(static_cast<double>(lp_base[j])));
    }
    printf("[%zu]%.4f,", w + 1, exp(nll.mean()));
    fflush(stdout);
  }
  printf("\n");
  const double ppl = exp(nll.mean());
  printf("Final estimate: PPL = %.4f +/- %.5f\n", ppl, nll.err() * ppl);
  if (kl) {
    const double ppl_base = exp(nll_base.mean());
    printf("KL divergence vs %s (%zu tokens):\n", base_path.c_str(), kld.n);
    printf("  PPL(base) = %.4f +/- %.5f   PPL ratio = %.6f\n", ppl_base,
           nll_base.err() * ppl_base, ppl / ppl_base);
    printf("  mean KL = %.6f +/- %.6f   median %.6f   99%% %.6f   max %.6f\n", kld.mean(),
           kld.err(), percentile(kl_all, 0.5), percentile(kl_all, 0.99),
           *std::max_element(kl_all.begin(), kl_all.end()));
    printf("  top-1 agreement = %.3f %%\n", 100.0 * top1_same / kld.n);
    const double rms = sqrt(dp.sum2 / dp.n);
    printf("  mean dp = %.4f %% +/- %.4f %%   RMS dp = %.4f %%\n", 100 * dp.mean(),
           100 * dp.err(), 100 * rms);
  }
  const double run_tokens = static_cast<double>(n_windows) * ctx;
  fprintf(stderr, "[%zu tokens scored | %.1f tokens/s through the model%s]\n", nll.n,
          t_model > 0 ? run_tokens / t_model : 0.0, kl ? " (the model under test)" : "");
  return 0;
}
