// ringlm bench: prefill and decode throughput in the style of llama-bench, on a model file or on a
// synthetic random-weight model of a real model's shape, with the machine's memory bandwidth as
// the yardstick for decode.
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "bandwidth.h"
#include "bench_grammar.h"
#include "cli_common.h"
#include "commands.h"
#include "convert/convert.h"
#include "convert/synthetic.h"
#include "convert/writer.h"
#include "grammar_flags.h"
#include "mapped_file.h"
#include "model_generated.h"
#include "platform/cpu_features.h"
#include "tokenizer_source.h"
#include "ringlm/ringlm.h"

#include <nlohmann/json.hpp>

namespace {

using namespace ringlm::internal;

const char kUsage[] =
    "usage: ringlm bench -m MODEL [options]\n"
    "       ringlm bench --synthetic CONFIG.json|DIR|smollm2-135m\n"
    "                    [--quant q8|q4|q5|q4_1|q5_1|q4k|q5k|q6k|q4k_m|q5k_m|f16|f32] [options]\n"
    "\n"
    "Measures prefill (ppN: one rlm_session_eval over N random token ids) and decode (tgN: N\n"
    "rlm_step calls from an empty context, greedy, EOS ignored, no token limit) throughput and\n"
    "prints a markdown table (mean ± sd of tokens/s over the repetitions, after one untimed\n"
    "warm-up), then: effective weight bandwidth during decode (weight bytes x tokens/s) and its\n"
    "share of the measured memory bandwidth, model open time, session bytes and peak RSS.\n"
    "\n"
    "model:\n"
    "  -m, --model FILE        model file (.rlm, from `ringlm convert`)\n"
    "      --synthetic SPEC    random-weight model of a real shape, built in memory: a Hugging\n"
    "                          Face config.json (or the directory holding it), or the built-in\n"
    "                          smollm2-135m. The config's family is reproduced (llama, mistral,\n"
    "                          qwen2, qwen3, gemma2, gemma3, phi3: biases, qk-norm, Gemma norms,\n"
    "                          sliding-window layers, rope scaling) as the converter reads it.\n"
    "      --quant TYPE        synthetic weights as q8 (default), q4, q5, q4_1, q5_1, q4k, q5k,\n"
    "                          q6k, f16 or f32, generated directly in that encoding; or the\n"
    "                          mixed presets q4k_m / q5k_m (q4k / q5k, with the output and some\n"
    "                          layers' attention V and FFN down in q6k, as llama.cpp's Q4_K_M /\n"
    "                          Q5_K_M)\n"
    "      --as-llama          synthetic: the Llama-family equivalent of the same dimensions (no\n"
    "                          biases / qk-norm / Gemma extras / sliding windows / rope scaling;\n"
    "                          each dropped feature is named on stderr); also builds configs the\n"
    "                          family reader refuses, from their dimensions alone\n"
    "      --seed N            synthetic weight seed (default 1)\n"
    "      --layers N          synthetic: use N layers instead of the config's (for tests and\n"
    "                          quick runs; the table's model name says so)\n"
    "      --vocab FILE        synthetic: a real vocabulary (GGUF, tokenizer.json, tiktoken\n"
    "                          rank file, llama2.c tokenizer.bin) instead of the synthetic one;\n"
    "                          its size replaces the config's vocab_size\n"
    "\n"
    "run:\n"
    "  -p, --n-prompt N        prefill test length (default 128; 0 = no pp test)\n"
    "  -n, --n-gen N           decode test length (default 128; 0 = no tg test)\n"
    "  -d, --depth LIST        context depths, comma-separated (default 0): the pp and tg tests\n"
    "                          run after D tokens of context (random ids, prefilled untimed; rows\n"
    "                          named \"pp128 @ d2048\" as llama-bench's -d): decode reads the KV\n"
    "                          cache of D positions per token. Each depth has its own session,\n"
    "                          prefilled once, and repetition r runs at every depth before\n"
    "                          repetition r + 1, so drift of the machine reaches every depth\n"
    "                          alike; a line per further depth gives its t/s over the first\n"
    "                          depth's (the means' ratio, the median and range of the\n"
    "                          per-repetition ratios) and for tg the ratio of bytes per token a\n"
    "                          bandwidth-bound decode would give\n"
    "  -t, --threads LIST      thread counts, comma-separated (default 1); one row per count.\n"
    "                          A count the runtime refuses is reported as \"unsupported\".\n"
    "  -k, --kernels LIST      kernel tables, comma-separated (default auto): auto = the runtime's\n"
    "                          choice for this CPU (the backend column names the table it\n"
    "                          resolves to), or force ref, avx2, avx512, neon, dotprod, i8mm,\n"
    "                          armv7; one row per table, \"unsupported\" where this CPU or build\n"
    "                          lacks it\n"
    "      --backend LIST      matmul backends, comma-separated (default native): native = the\n"
    "                          kernel table above; xnnpack = f32 weight matrices on XNNPACK\n"
    "                          (column \"XNNPACK+CPU/<kernels>\": the rest stays native), e.g.\n"
    "                          --backend native,xnnpack to compare in one table; \"unsupported\"\n"
    "                          without XNNPACK in the build or without f32 matrices\n"
    "      --background LIST   background load, comma-separated counts of busy-loop processes\n"
    "                          (e.g. 0,1,2): each count gets its own rows (column \"load\"),\n"
    "                          with the processes started before its runs and stopped after\n"
    "                          them (and at exit). They inherit this process's CPU affinity,\n"
    "                          so they compete for the same cores (pin the bench with taskset\n"
    "                          to choose them). Default -t becomes 1,2, and a summary line per\n"
    "                          load compares each thread count with one thread.\n"
    "  -r, --repetitions N     timed repetitions per test (default 5)\n"
    "      --clock wall|cpu    what pp / tg rows are timed by (default wall): cpu = the process's\n"
    "                          CPU time, all threads (compares kernels on a machine other work\n"
    "                          shares: time spent waiting for a core is left out; memory\n"
    "                          bandwidth still is shared); its rows are named \"tg128 (cpu)\"\n"
    "  -b, --batch N           prefill tokens per forward pass (n_batch; default min(p, 512))\n"
    "      --kv f32|f16|q8     KV cache precision (default f16)\n"
    "      --bw-mib N          memory-bandwidth buffer size in MiB (default 256, far above the\n"
    "                          last-level cache; 0 = skip the bandwidth measurement)\n"
    "      --vs-roofline       measure the bandwidth first (in a child process) and add a column:\n"
    "                          each decode row's bytes per token (weights, + KV at its depth) x\n"
    "                          t/s as a share of the read bandwidth of its thread count (the\n"
    "                          faster of one and of four sequential streams a thread, as decode\n"
    "                          reads a matrix; speculative rows can pass 100 %: several tokens\n"
    "                          per weight read)\n"
    "      --bw-each           measure the read bandwidth (in a child process, --bw-mib buffers,\n"
    "                          best of 2) just before every timed tg repetition, and report each\n"
    "                          decode row's share of it repetition by repetition (median and\n"
    "                          range): a share that the machine's drifting bandwidth between the\n"
    "                          runs and the end-of-run measurement does not move\n"
    "  -o, --output md|json    md (default): the markdown table and notes on stdout; json: one\n"
    "                          JSON document on stdout for scripts (environment, config, rows,\n"
    "                          bandwidth, decode bytes per token, depth ratios), the table and\n"
    "                          notes on stderr\n"
    "      --spec-lookup LIST  speculative rows next to tg, draft lengths comma-separated (e.g.\n"
    "                          4,8): the \"echo\" test. The model's own greedy output G of tgN\n"
    "                          from the start token becomes the prompt [start, G, start] (not\n"
    "                          timed); then N greedy steps after it, plainly (\"echo tgN\") and\n"
    "                          with prompt lookup of at most K drafts (\"echo tgN lookupK\"), the\n"
    "                          same tokens either way (checked). A line per K gives the accepted\n"
    "                          share, tokens per target pass, the speed-up and the cost of one\n"
    "                          1+K verification pass in one-token passes.\n"
    "      --grammar FILE.gbnf | --json-schema FILE.json | --json\n"
    "                          constrained-decoding rows next to tg: \"tgN t=1\" (N sampled steps\n"
    "                          at temperature 1, seed 1, no grammar) and \"tgN t=1 grammar\" (the\n"
    "                          same with the grammar's mask; a turn the grammar ends restarts\n"
    "                          from the start token). Then the tokens of the grammar run are\n"
    "                          replayed through the mask stage alone (no forward pass), 3 rounds,\n"
    "                          and a line gives the compile time and memory, the mask + accept\n"
    "                          time per token (median, p99,\n"
    "                          max, in microseconds), the mean share of the vocabulary allowed,\n"
    "                          and decode with the grammar as a share of decode without\n"
    "      --grammar-state-bytes N  parse-state budget per matcher (default 1 MiB)\n"
    "      --grammar-cache-bytes N  remembered masks (default 4 MiB, 0 = none): the replay\n"
    "                          keeps one cache across its rounds' turns like a session; the\n"
    "                          line also gives its hits and misses, how many misses were\n"
    "                          derived from a relaxed state's mask (bounded repetitions)\n"
    "                          and how many relaxed states were walked for them\n"
    "      --snapshot          after ppN: save the prefilled session (rlm_session_save) and\n"
    "                          restore it (rlm_session_restore), timed over the repetitions; a\n"
    "                          line gives the snapshot size, save and restore times and restore\n"
    "                          against the prefill it replaces\n"
    "      --cancel            after ppN: a second thread calls rlm_session_cancel halfway\n"
    "                          through the prefill; a line gives how long rlm_session_eval took\n"
    "                          to return after it (median and max over the repetitions)\n"
    "      --verify LIST       verification-pass cost, draft lengths comma-separated (e.g.\n"
    "                          4,8): after D tokens of context (the largest --depth, at least\n"
    "                          16), one pass of 1+K tokens keeping the logits of every row\n"
    "                          (rlm_session_score: what a speculative verification runs) against\n"
    "                          a one-token pass, alternated and rewound to the same context, 20\n"
    "                          pairs per repetition; a line per K gives the median times and\n"
    "                          their ratio\n"
    "      --beams LIST        beam-search rows next to tg, widths comma-separated (1..16):\n"
    "                          \"tgN beamB\" is a search of width B for N tokens after the start\n"
    "                          token (end tokens ignored, so every search runs N steps), in beam\n"
    "                          steps per second; a line per B gives the cost of one step (all B\n"
    "                          beams in one batched pass, plus the selection) in one-token decode\n"
    "                          steps of tgN runs alternated with the searches (medians)\n"
    "  -h, --help              this help\n"
    "\n"
    "The table goes to stdout; progress and notes go to stderr. Exit status: 0 when every row\n"
    "ran, 1 when a row is \"unsupported\" or failed (the table is still printed), 2 for usage\n"
    "errors.\n";

// A comma-separated list of non-empty items.
bool parse_name_list(const char* s, std::vector<std::string>* out) {
  std::string item;
  for (const char* p = s;; ++p) {
    if (*p == ',' || *p == '\0') {
      if (item.empty()) return false;
      out->push_back(item);
      item.clear();
      if (!*p) break;
    } else {
      item += *p;
    }
  }
  return !out->empty();
}

bool parse_u32_list(const char* s, std::vector<uint32_t>* out, bool zero_ok = false) {
  std::vector<std::string> items;
  if (!parse_name_list(s, &items)) return false;
  for (const std::string& item : items) {
    uint32_t v;
    if (!parse_u32(item.c_str(), &v) || (v == 0 && !zero_ok)) return false;
    out->push_back(v);
  }
  return true;
}

std::string human_bytes(double b) {
  char buf[64];
  if (b >= 1024.0 * 1024 * 1024) snprintf(buf, sizeof buf, "%.2f GiB", b / (1024.0 * 1024 * 1024));
  else if (b >= 1024.0 * 1024) snprintf(buf, sizeof buf, "%.2f MiB", b / (1024.0 * 1024));
  else snprintf(buf, sizeof buf, "%.2f KiB", b / 1024.0);
  return buf;
}

std::string human_params(double n) {
  char buf[64];
  if (n >= 1e9) snprintf(buf, sizeof buf, "%.2f B", n / 1e9);
  else if (n >= 1e6) snprintf(buf, sizeof buf, "%.2f M", n / 1e6);
  else snprintf(buf, sizeof buf, "%.2f K", n / 1e3);
  return buf;
}

// Model bytes in memory: a mapped file, or a synthetic model in an anonymous memory file.
struct ModelBytes {
  MappedFile file;
  void* map = nullptr;
  size_t map_size = 0;
  const void* data() const { return map ? map : file.data(); }
  size_t size() const { return map ? map_size : file.size(); }
  ~ModelBytes() {
    if (map) munmap(map, map_size);
  }
};

// Writes the model (streamed, one tensor at a time) into `fd` with buffered writes.
bool write_model_fd(const conv::ModelData& md, fb::DType quant, int fd, std::string* err) {
  return conv::write_model_to_fd(md, quant, fd, "writing the synthetic model failed", err);
}

// Builds the synthetic model's bytes into an anonymous memory file and maps it (page-aligned, so
// 64-aligned). The build runs in a child process so its transient buffers (one tensor at a time,
// in its encoding: a few hundred MB for a large embedding) do not count in this process's peak
// RSS; the model bytes do, once touched, as a mapped model file's would.
bool build_synthetic(const conv::ModelData& md, fb::DType quant, ModelBytes* out,
                     std::string* err) {
  int fd = memfd_create("ringlm-synthetic", MFD_CLOEXEC);
  if (fd < 0) {
    *err = std::string("memfd_create failed: ") + strerror(errno);
    return false;
  }
  fflush(stdout);
  fflush(stderr);
  const pid_t pid = fork();
  if (pid == 0) {
    std::string e;
    if (!write_model_fd(md, quant, fd, &e)) {
      fprintf(stderr, "ringlm bench: %s\n", e.c_str());
      _exit(1);
    }
    _exit(0);
  }
  bool ok = true;
  if (pid < 0) {  // no fork: build here
    ok = write_model_fd(md, quant, fd, err);
  } else {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      *err = "building the synthetic model failed";
      ok = false;
    }
  }
  struct stat st;
  if (ok && (fstat(fd, &st) != 0 || st.st_size <= 0)) {
    *err = "the synthetic model is empty";
    ok = false;
  }
  if (ok) {
    void* p = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      *err = std::string("mmap of the synthetic model failed: ") + strerror(errno);
      ok = false;
    } else {
      out->map = p;
      out->map_size = static_cast<size_t>(st.st_size);
    }
  }
  close(fd);
  return ok;
}

// Parameter count and the storage type of the 2-D weights, from the verified header: "q8", or
// "mixed q4k+q8" (in first-seen order) for a mixed preset.
void describe_weights(const void* bytes, double* params, std::string* quant) {
  const fb::Model* m = fb::GetSizePrefixedModel(bytes);
  *params = 0;
  quant->clear();
  if (!m->tensors()) return;
  std::vector<std::string> kinds;
  for (const fb::Tensor* t : *m->tensors()) {
    double n = 1;
    if (t->shape())
      for (uint64_t d : *t->shape()) n *= static_cast<double>(d);
    *params += n;
    if (t->shape() && t->shape()->size() == 2) {
      const std::string q = conv::dtype_name(t->dtype());
      if (std::find(kinds.begin(), kinds.end(), q) == kinds.end()) kinds.push_back(q);
    }
  }
  for (size_t i = 0; i < kinds.size(); ++i) *quant += (i ? "+" : "") + kinds[i];
  if (kinds.size() > 1) *quant = "mixed " + *quant;
  if (quant->empty()) *quant = "f32";
}

// Session memory owned by the tool; the session is released (worker threads joined) before the
// memory is freed.
// --background: busy-loop child processes competing for this process's cores (a phone's other
// apps, a shared server). Children inherit the CPU affinity and die with this process
// (PR_SET_PDEATHSIG), so none outlives the bench even if it is killed.
class BackgroundLoad {
 public:
  BackgroundLoad() = default;
  BackgroundLoad(const BackgroundLoad&) = delete;
  BackgroundLoad& operator=(const BackgroundLoad&) = delete;
  ~BackgroundLoad() { stop(); }

  // Starts n busy processes; false (none left running) if fork fails.
  bool start(uint32_t n) {
    const pid_t parent = getpid();
    fflush(stdout);
    fflush(stderr);
    for (uint32_t i = 0; i < n; ++i) {
      const pid_t pid = fork();
      if (pid < 0) {
        stop();
        return false;
      }
      if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(0);  // the bench is already gone
        volatile uint64_t spin = 0;
        for (;;) spin = spin + 1;
      }
      pids_.push_back(pid);
    }
    return true;
  }

  void stop() {
    for (pid_t pid : pids_) kill(pid, SIGKILL);
    for (pid_t pid : pids_) {
      while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
    pids_.clear();
  }

  const std::vector<pid_t>& pids() const { return pids_; }

 private:
  std::vector<pid_t> pids_;
};

// Weights below this are likely cache-resident during decode (a typical per-cluster L3).
constexpr uint64_t kCacheSized = 32ull << 20;

// The table a NULL rlm_session_config.kernels resolves to: the C ABI does not report it, so try
// the documented tables fastest first (as the runtime ranks them) and take the first this CPU and
// build run. "" if none initialises.
// Every kernel table this CPU and build can run for `model`, best first (ref last).
std::vector<std::string> runnable_kernels(const rlm_model* model, rlm_session_config cfg) {
  static const char* const kOrder[] = {"avx512", "avx2", "i8mm", "dotprod", "neon", "armv7", "ref"};
  std::vector<std::string> out;
  cfg.n_threads = 1;
  for (const char* name : kOrder) {
    cfg.kernels = name;
    size_t need = 0, align = 0;
    if (rlm_session_memory(model, &cfg, &need, &align) != RLM_OK) continue;  // not this CPU's
    CliSession session;
    if (session.open("bench", model, cfg, nullptr)) out.push_back(name);
  }
  return out;
}

// The table "auto" picks: the best runnable one.
std::string resolve_auto_kernels(const rlm_model* model, rlm_session_config cfg) {
  const std::vector<std::string> r = runnable_kernels(model, cfg);
  return r.empty() ? "" : r.front();
}

// What a table was measured on, printed above it and written with --json: results depend on
// the CPU and the kernel table as much as on the model.
struct BenchEnvironment {
  std::string cpu;                    // /proc/cpuinfo's model name (or the ARM part), else "unknown"
  uint32_t cpus_online = 0;
  std::string features;               // cpu_features_describe
  std::string auto_kernels;           // the table "auto" resolves to
  std::vector<std::string> runnable;  // every table this CPU and build can run, best first
};

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, part, implementer;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon), value = line.substr(colon + 1);
    while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.pop_back();
    while (!value.empty() && value.front() == ' ') value.erase(value.begin());
    if (key == "model name" || key == "Hardware" || key == "Model") return value;
    if (key == "CPU part" && part.empty()) part = value;
    if (key == "CPU implementer" && implementer.empty()) implementer = value;
  }
  if (!part.empty()) return "ARM implementer " + implementer + " part " + part;
  return "unknown";
}

BenchEnvironment bench_environment(const rlm_model* model, rlm_session_config cfg) {
  BenchEnvironment e;
  e.cpu = cpu_model_name();
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  e.cpus_online = n > 0 ? static_cast<uint32_t>(n) : 0;
  char buf[256];
  const size_t len = cpu_features_describe(cpu_features_detect(), buf, sizeof buf);
  e.features = len ? std::string(buf, std::min(len, sizeof buf - 1)) : "(none)";
  e.runnable = runnable_kernels(model, cfg);
  e.auto_kernels = e.runnable.empty() ? "?" : e.runnable.front();
  return e;
}

void print_environment(const BenchEnvironment& e) {
  std::string tables;
  for (const std::string& t : e.runnable) tables += (tables.empty() ? "" : ", ") + t;
  printf("cpu: %s (%u online) | features: %s | kernels: auto = %s (runnable: %s)\n\n",
         e.cpu.c_str(), e.cpus_online, e.features.c_str(), e.auto_kernels.c_str(),
         tables.c_str());
  fflush(stdout);
}

// Bytes one decode step reads: the weights, and with `depth` the K and V rows of every position
// before it (the mean over an n_gen-token run: depth + n_gen / 2; sliding-window layers are
// counted as global).
double decode_bytes_per_token(const rlm_model_info& info, rlm_kv_dtype kv, uint32_t depth,
                              uint32_t n_gen) {
  const double kv_dim = static_cast<double>(info.n_kv_heads) * info.head_dim;
  const double row = kv == RLM_KV_F32   ? 4 * kv_dim
                     : kv == RLM_KV_F16 ? 2 * kv_dim
                                        : kv_dim + 4.0 * info.n_kv_heads;
  const double kv_read = depth ? 2.0 * info.n_layers * row * (depth + n_gen / 2.0) : 0;
  return static_cast<double>(info.weight_bytes) + kv_read;
}

// The thread counts the bandwidth is measured with: 1, 2 and every count of the table.
std::vector<uint32_t> bandwidth_thread_counts(const std::vector<uint32_t>& threads) {
  std::vector<uint32_t> counts = {1, 2};
  for (uint32_t t : threads)
    if (std::find(counts.begin(), counts.end(), t) == counts.end()) counts.push_back(t);
  std::sort(counts.begin(), counts.end());
  return counts;
}

// measure_bandwidth for each count in a child process (its buffers never touch this process's
// peak RSS); results come back through a pipe. Empty if the child fails.
std::vector<BandwidthResult> bandwidth_in_child(uint32_t mib, const std::vector<uint32_t>& counts,
                                               int reps = 5) {
  std::vector<BandwidthResult> out;
  int fds[2];
  if (pipe(fds) != 0) return out;
  fflush(stdout);
  fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return out;
  }
  if (pid == 0) {
    close(fds[0]);
    for (uint32_t c : counts) {
      BandwidthResult b;
      if (!measure_bandwidth(static_cast<size_t>(mib) << 20, c, reps, &b)) continue;
      if (write(fds[1], &b, sizeof b) != static_cast<ssize_t>(sizeof b)) break;
    }
    _exit(0);
  }
  close(fds[1]);
  BandwidthResult b;
  while (read(fds[0], &b, sizeof b) == static_cast<ssize_t>(sizeof b)) out.push_back(b);
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return out;
}

struct Stat {
  double mean = 0, sd = 0;
};

Stat stats_of(const std::vector<double>& v) {
  Stat s;
  if (v.empty()) return s;
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  if (v.size() > 1) {
    double q = 0;
    for (double x : v) q += (x - s.mean) * (x - s.mean);
    s.sd = sqrt(q / static_cast<double>(v.size() - 1));
  }
  return s;
}

// The median of `v` (its upper middle for an even count); 0 for none.
double median_of(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Runner {
  rlm_session* s = nullptr;
  uint32_t vocab = 0;
  int32_t first_token = 0;
  uint64_t rng = 0x9e3779b97f4a7c15ull;
  std::vector<int32_t> ids;
  std::string error;
  uint32_t depth = 0;  // pp and tg start after this many tokens of context (--depth)
  bool cpu_clock = false;  // --clock cpu: time by the process's CPU time instead of the wall

  // Seconds on the clock the rows are timed with.
  double clock_s() const {
    if (!cpu_clock) return now_s();
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  }

  int32_t random_token() {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    const uint32_t lo = vocab > 3 ? 3 : 0;  // skip <unk> <s> </s>-like low ids
    return static_cast<int32_t>(lo + rng % (vocab - lo));
  }

  bool fail(const char* what, rlm_status st) {
    error = std::string(what) + ": " + rlm_status_string(st);
    const char* m = rlm_session_error(s);
    if (*m) error += std::string(": ") + m;
    return false;
  }

  // The session at `depth` tokens of context (random ids), untimed: a rewind when it already
  // holds that many (their values do not matter to the timing), else a reset and a prefill.
  bool to_depth() {
    rlm_status st;
    if (depth > 0 && rlm_session_position(s) >= depth && rlm_session_rewind(s, depth) == RLM_OK) {
      return true;
    }
    if ((st = rlm_session_reset(s)) != RLM_OK) return fail("reset", st);
    if (depth == 0) return true;
    ids.resize(depth);
    for (int32_t& t : ids) t = random_token();
    if ((st = rlm_session_feed_tokens(s, ids.data(), ids.size())) != RLM_OK)
      return fail("feed (depth)", st);
    if ((st = rlm_session_eval(s)) != RLM_OK) return fail("eval (depth)", st);
    return true;
  }

  // Prefill of p random tokens after `depth`: seconds of the rlm_session_eval call.
  bool pp(uint32_t p, double* secs) {
    if (!to_depth()) return false;
    rlm_status st;
    ids.resize(p);
    for (int32_t& t : ids) t = random_token();
    if ((st = rlm_session_feed_tokens(s, ids.data(), ids.size())) != RLM_OK)
      return fail("feed", st);
    const double t0 = clock_s();
    st = rlm_session_eval(s);
    *secs = clock_s() - t0;
    if (st != RLM_OK) return fail("eval", st);
    if (rlm_session_position(s) != depth + p) {
      error = "eval ran to position " + std::to_string(rlm_session_position(s)) + ", expected " +
              std::to_string(depth + p);
      return false;
    }
    return true;
  }

  // n decode steps from one start token after `depth`: seconds of the n rlm_step calls.
  bool tg(uint32_t n, double* secs) {
    if (!to_depth()) return false;
    rlm_status st;
    rlm_session_set_max_tokens(s, 0);
    rlm_session_set_ignore_eos(s, 1);
    const int32_t start = first_token;
    if ((st = rlm_session_feed_tokens(s, &start, 1)) != RLM_OK) return fail("feed", st);
    rlm_step_result r;
    rlm_step_result_default(&r);
    const double t0 = clock_s();
    for (uint32_t i = 0; i < n; ++i) {
      if ((st = rlm_step(s, &r)) != RLM_OK) {
        *secs = clock_s() - t0;
        return fail("step", st);
      }
      if (r.stop != RLM_STOP_NONE) {
        error = "generation stopped early (stop reason " + std::to_string(r.stop) + ")";
        return false;
      }
    }
    *secs = clock_s() - t0;
    return true;
  }

  // n steps with the session's sampling from the start token. With `end_turns`, end tokens
  // count (not ignored) and a turn that stops (an end token, or the grammar complete) restarts
  // from the start token; `turns` gets each turn's tokens. Seconds of the steps and restarts.
  bool tg_turns(uint32_t n, bool end_turns, double* secs,
                std::vector<std::vector<int32_t>>* turns) {
    turns->clear();
    rlm_status st = RLM_OK;
    rlm_step_result r;
    rlm_step_result_default(&r);
    const int32_t start = first_token;
    const double t0 = clock_s();
    for (uint32_t i = 0; i < n; ++i) {
      if (turns->empty() || r.stop != RLM_STOP_NONE) {
        if ((st = rlm_session_reset(s)) != RLM_OK) return fail("reset", st);
        rlm_session_set_max_tokens(s, 0);
        rlm_session_set_ignore_eos(s, end_turns ? 0 : 1);
        if ((st = rlm_session_feed_tokens(s, &start, 1)) != RLM_OK) return fail("feed", st);
        turns->emplace_back();
      }
      if ((st = rlm_step(s, &r)) != RLM_OK) {
        *secs = clock_s() - t0;
        return fail("step", st);
      }
      turns->back().push_back(r.token);
      if (r.stop != RLM_STOP_NONE && !end_turns) {
        error = "generation stopped early (stop reason " + std::to_string(r.stop) + ")";
        return false;
      }
    }
    *secs = clock_s() - t0;
    return true;
  }

  // The echo test: n greedy steps after `prompt` (fed and evaluated untimed), with prompt lookup
  // of at most k drafts (k = 0: plainly). Seconds of the n steps, the tokens, the counters.
  bool echo(const std::vector<int32_t>& prompt, uint32_t n, uint32_t k, double* secs,
            std::vector<int32_t>* out, rlm_spec_stats* stats) {
    rlm_speculation spec;
    rlm_speculation_default(&spec);
    spec.mode = k ? RLM_SPEC_LOOKUP : RLM_SPEC_OFF;
    spec.n_max = k;
    rlm_status st = rlm_session_set_speculation(s, &spec);
    if (st != RLM_OK) return fail("speculation", st);
    if ((st = rlm_session_reset(s)) != RLM_OK) return fail("reset", st);
    rlm_session_set_max_tokens(s, 0);
    rlm_session_set_ignore_eos(s, 1);
    if ((st = rlm_session_feed_tokens(s, prompt.data(), prompt.size())) != RLM_OK)
      return fail("feed", st);
    if ((st = rlm_session_eval(s)) != RLM_OK) return fail("eval", st);
    rlm_step_result r;
    rlm_step_result_default(&r);
    out->clear();
    const double t0 = clock_s();
    for (uint32_t i = 0; i < n; ++i) {
      if ((st = rlm_step(s, &r)) != RLM_OK) return fail("step", st);
      out->push_back(r.token);
    }
    *secs = clock_s() - t0;
    rlm_spec_stats_default(stats);
    rlm_session_spec_stats(s, stats);
    return true;
  }
};

struct Row {
  uint32_t threads;
  std::string test;
  bool supported = false;
  Stat tps;
  uint32_t depth = 0;  // context tokens the test ran after (its decode bytes per token)
};

// The table as it is printed, kept for --json; with --vs-roofline a column giving each decode
// row's bytes per token x tokens/s as a share of the read bandwidth measured before the runs.
struct BenchReport {
  bool load_column = false;
  bool roofline = false;
  std::vector<BandwidthResult> bw;  // --vs-roofline: measured before the runs
  // What decode_bytes_per_token needs besides a depth.
  rlm_model_info info{};
  rlm_kv_dtype kv = RLM_KV_F16;
  uint32_t n_gen = 0;
  struct Rec {
    std::string model, backend, test;
    uint32_t threads = 0;
    int64_t load = -1;
    bool supported = false;
    double mean = 0, sd = 0, roofline_pct = -1;  // -1: no roofline figure for the row
    uint32_t depth = 0;
    double decode_bytes = -1;  // a decode row's bytes per token at its depth; -1 for others
  };

  // Bytes one decode step reads after `depth` tokens of context: weights (+ KV).
  double decode_bytes(uint32_t depth) const {
    return decode_bytes_per_token(info, kv, depth, n_gen);
  }
  std::vector<Rec> rows;

  const BandwidthResult* bw_for(uint32_t threads) const {
    for (const BandwidthResult& b : bw)
      if (b.threads == threads) return &b;
    return nullptr;
  }
  void header() const {
    printf("| model | size | params | backend | threads |%s test | t/s |%s\n",
           load_column ? " load |" : "", roofline ? " vs roofline |" : "");
    printf("| --- | ---: | ---: | --- | ---: |%s ---: | ---: |%s\n", load_column ? " ---: |" : "",
           roofline ? " ---: |" : "");
    fflush(stdout);
  }
  // `load`: the background process count, or -1 for no "load" column.
  void row(const std::string& model, const std::string& size, const std::string& params,
           const std::string& backend, int64_t load, const Row& r) {
    char tps[96];
    if (r.supported) snprintf(tps, sizeof tps, "%.2f ± %.2f", r.tps.mean, r.tps.sd);
    else snprintf(tps, sizeof tps, "unsupported");
    char load_cell[32] = "";
    if (load >= 0) snprintf(load_cell, sizeof load_cell, " %lld |", static_cast<long long>(load));
    Rec rec{model, backend, r.test, r.threads, load, r.supported, r.tps.mean, r.tps.sd, -1};
    rec.depth = r.depth;
    // Generated-token rows (tgN, echo tgN, its lookup rows): every token is one pass's worth of
    // weight reads at the roofline, so a speculative row may exceed 100 %.
    const bool decode_row = r.test.rfind("tg", 0) == 0 || r.test.rfind("echo tg", 0) == 0;
    if (decode_row && r.test.find(" beam") == std::string::npos)
      rec.decode_bytes = decode_bytes(r.depth);
    const BandwidthResult* b = bw_for(r.threads);
    if (roofline && r.supported && rec.decode_bytes >= 0 && b && b->read_gbs > 0)
      rec.roofline_pct = 100.0 * rec.decode_bytes * r.tps.mean / (b->read_gbs * 1e9);
    char roof[48] = "";
    if (roofline) {
      if (rec.roofline_pct >= 0) snprintf(roof, sizeof roof, " %.1f %% |", rec.roofline_pct);
      else snprintf(roof, sizeof roof, " - |");
    }
    printf("| %s | %s | %s | %s | %u |%s %s | %s |%s\n", model.c_str(), size.c_str(),
           params.c_str(), backend.c_str(), r.threads, load_cell, r.test.c_str(), tps, roof);
    fflush(stdout);
    rows.push_back(rec);
  }
};

// --grammar: the rows "tgN t=1" and "tgN t=1 grammar", then the mask replay's summary line
// (into *lines). False with the message printed.
bool grammar_rows(BenchReport& report, Runner& run, const rlm_grammar* g, double compiled_s,
                  size_t grammar_bytes,
                  const rlm_model* model, const rlm_session_config& cfg,
                  uint32_t n_gen, uint32_t reps, uint32_t nt, const std::string& backend,
                  const std::string& label, const std::string& size_s, const std::string& params_s,
                  int64_t load_cell, uint32_t* rows_total, std::vector<std::string>* lines) {
  rlm_sampling t1;
  rlm_sampling_default(&t1);
  t1.temperature = 1.0f;
  t1.seed = 1;
  rlm_sampling greedy;
  rlm_sampling_default(&greedy);
  greedy.temperature = 0.0f;
  rlm_session* s = run.s;
  const std::string base = "tg" + std::to_string(n_gen) + " t=1";
  std::vector<std::vector<int32_t>> turns;
  double secs = 0, tps[2] = {0, 0};
  for (int with = 0; with < 2; ++with) {
    rlm_status st = rlm_session_set_sampling(s, &t1);
    if (st == RLM_OK) st = rlm_session_set_grammar(s, with ? g : nullptr);
    if (st != RLM_OK) {
      fprintf(stderr, "ringlm bench: %s: %s: %s\n", base.c_str(), rlm_status_string(st),
              rlm_session_error(s));
      return false;
    }
    std::vector<double> v;
    for (uint32_t r = 0; r < reps; ++r) {
      if (!run.tg_turns(n_gen, with != 0, &secs, &turns)) {
        fprintf(stderr, "ringlm bench: %s%s: %s\n", base.c_str(), with ? " grammar" : "",
                run.error.c_str());
        return false;
      }
      v.push_back(n_gen / secs);
    }
    const Row row{nt, base + (with ? " grammar" : ""), true, stats_of(v)};
    tps[with] = row.tps.mean;
    report.row(label, size_s, params_s, backend, load_cell, row);
    ++*rows_total;
  }
  rlm_session_set_grammar(s, nullptr);
  rlm_session_set_sampling(s, &greedy);
  // `turns` now holds the tokens of the last grammar repetition.
  MaskTimes mt;
  std::string err;
  if (!replay_mask_times(model, g, cfg.grammar_state_bytes, cfg.grammar_cache_bytes, turns, 3,
                         &mt, &err)) {
    fprintf(stderr, "ringlm bench: grammar mask replay: %s\n", err.c_str());
    return false;
  }
  rlm_model_info info;
  rlm_model_info_default(&info);
  rlm_model_get_info(model, &info);
  const double compile_ms = compiled_s * 1e3;
  const std::string cache_name =
      cfg.grammar_cache_bytes ? human_bytes(cfg.grammar_cache_bytes) : std::string("off");
  char line[640];
  snprintf(line, sizeof line,
           "grammar mask (%s, %u thread%s; vocabulary %u; compiled in %.1f ms, %s): %zu tokens in "
           "%zu turns, mask + accept "
           "per token median %.1f us, p99 %.1f us, max %.1f us (mask cache %s: %llu hits, %llu "
           "misses, %llu of them derived, %llu relaxed walks); %.1f %% of the vocabulary allowed "
           "on average; decode t=1 with the grammar "
           "%.2f t/s = %.1f %% of %.2f t/s without",
           backend.c_str(), nt, nt == 1 ? "" : "s", info.vocab_size, compile_ms,
           human_bytes(static_cast<double>(grammar_bytes)).c_str(), mt.us.size(), turns.size(),
           percentile(mt.us, 0.5), percentile(mt.us, 0.99), percentile(mt.us, 1.0),
           cache_name.c_str(), static_cast<unsigned long long>(mt.hits),
           static_cast<unsigned long long>(mt.misses),
           static_cast<unsigned long long>(mt.derived),
           static_cast<unsigned long long>(mt.relaxed_walks),
           mt.us.empty() ? 0.0
                         : 100.0 * static_cast<double>(mt.allowed) /
                               (static_cast<double>(mt.us.size()) * info.vocab_size),
           tps[1], tps[0] > 0 ? 100.0 * tps[1] / tps[0] : 0.0, tps[0]);
  lines->push_back(line);
  return true;
}

// The command line of `ringlm bench`, after defaults.
struct BenchOptions {
  std::string model_path, synthetic, vocab;
  fb::DType quant = fb::DType::Q8;
  std::string preset;  // --quant q4k_m: a mixed preset (conv::apply_quant_preset)
  bool quant_given = false, as_llama = false;
  uint32_t seed = 1, layers = 0, n_prompt = 128, n_gen = 128, reps = 5, batch = 0, bw_mib = 256;
  std::vector<uint32_t> threads, loads;
  std::vector<std::string> kernels, backends;
  std::vector<uint32_t> spec_lookup;  // --spec-lookup: draft lengths of the echo rows
  std::vector<uint32_t> beams;        // --beams: beam widths of the beam rows
  std::vector<uint32_t> verify;       // --verify: draft lengths of the verification-pass lines
  bool snapshot = false;              // --snapshot: restore of the ppN prefix against its prefill
  bool cancel = false;                // --cancel: latency of rlm_session_cancel during ppN
  GrammarFlags grammar;               // --grammar / --json-schema / --json: the mask rows
  rlm_kv_dtype kv = RLM_KV_F16;  // the runtime's default
  std::vector<uint32_t> depths;       // --depth: context tokens before the pp and tg runs
  bool cpu_clock = false;             // --clock cpu
  bool vs_roofline = false;           // --vs-roofline: the table's roofline column
  bool bw_each = false;               // --bw-each: read bandwidth before every tg repetition
  bool json_output = false;           // -o json
};

// Parses argv into *o. Returns -1 to go on, else the exit status (0 for --help, 2 for a usage
// error, with its message printed).
int parse_bench_flags(int argc, char** argv, BenchOptions* o) {
  std::string& model_path = o->model_path;
  std::string& synthetic = o->synthetic;
  fb::DType& quant = o->quant;
  bool &quant_given = o->quant_given, &as_llama = o->as_llama;
  uint32_t &seed = o->seed, &layers = o->layers, &n_prompt = o->n_prompt, &n_gen = o->n_gen,
           &reps = o->reps, &batch = o->batch, &bw_mib = o->bw_mib;
  std::vector<uint32_t> &threads = o->threads, &loads = o->loads;
  std::vector<std::string> &kernels = o->kernels, &backends = o->backends;
  rlm_kv_dtype& kv = o->kv;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = nullptr;
    auto need = [&]() -> bool {
      if (i + 1 >= argc) {
        fprintf(stderr, "ringlm bench: %s needs a value\n", a.c_str());
        return false;
      }
      v = argv[++i];
      return true;
    };
    bool ok = true;
    bool handled = false;
    if (!parse_grammar_flag("bench", argc, argv, &i, &o->grammar, &handled)) return 2;
    if (handled) continue;
    if (a == "-h" || a == "--help") {
      fputs(kUsage, stdout);
      return 0;
    } else if (a == "-m" || a == "--model") {
      if (!need()) return 2;
      model_path = v;
    } else if (a == "--synthetic") {
      if (!need()) return 2;
      synthetic = v;
    } else if (a == "--quant") {
      if (!need()) return 2;
      o->preset.clear();
      if (conv::apply_quant_preset(v, nullptr, &quant)) o->preset = v;
      else ok = conv::parse_dtype(v, &quant);
      quant_given = true;
    } else if (a == "--as-llama") {
      as_llama = true;
    } else if (a == "--vocab") {
      if (!need()) return 2;
      o->vocab = v;
    } else if (a == "--seed") {
      if (!need()) return 2;
      ok = parse_u32(v, &seed);
    } else if (a == "--layers") {
      if (!need()) return 2;
      ok = parse_u32(v, &layers) && layers > 0;
    } else if (a == "-p" || a == "--n-prompt") {
      if (!need()) return 2;
      ok = parse_u32(v, &n_prompt) && n_prompt <= (1u << 20);
    } else if (a == "-d" || a == "--depth") {
      if (!need()) return 2;
      o->depths.clear();  // the last -d counts, as for the single-valued flags
      ok = parse_u32_list(v, &o->depths, true);
      for (uint32_t d : o->depths) ok = ok && d <= (1u << 20);
      for (size_t k = 0; ok && k < o->depths.size(); ++k) {
        if (std::count(o->depths.begin(), o->depths.begin() + k, o->depths[k])) {
          fprintf(stderr, "ringlm bench: depth %u is given twice in %s %s\n", o->depths[k],
                  a.c_str(), v);
          return 2;
        }
      }
    } else if (a == "-n" || a == "--n-gen") {
      if (!need()) return 2;
      ok = parse_u32(v, &n_gen) && n_gen <= (1u << 20);
    } else if (a == "-t" || a == "--threads") {
      if (!need()) return 2;
      ok = parse_u32_list(v, &threads);
    } else if (a == "-k" || a == "--kernels") {
      if (!need()) return 2;
      ok = parse_name_list(v, &kernels);
    } else if (a == "--backend") {
      if (!need()) return 2;
      ok = parse_name_list(v, &backends);
      for (const std::string& b : backends) ok = ok && (b == "native" || b == "xnnpack");
    } else if (a == "--background") {
      if (!need()) return 2;
      ok = parse_u32_list(v, &loads, true);
      for (uint32_t n : loads) ok = ok && n <= 64;
    } else if (a == "--vs-roofline") {
      o->vs_roofline = true;
    } else if (a == "--bw-each") {
      o->bw_each = true;
    } else if (a == "-o" || a == "--output") {
      if (!need()) return 2;
      ok = !strcmp(v, "md") || !strcmp(v, "json");
      o->json_output = ok && !strcmp(v, "json");
    } else if (a == "--clock") {
      if (!need()) return 2;
      ok = !strcmp(v, "wall") || !strcmp(v, "cpu");
      o->cpu_clock = ok && !strcmp(v, "cpu");
    } else if (a == "-r" || a == "--repetitions") {
      if (!need()) return 2;
      ok = parse_u32(v, &reps) && reps > 0;
    } else if (a == "-b" || a == "--batch") {
      if (!need()) return 2;
      ok = parse_u32(v, &batch) && batch > 0;
    } else if (a == "--kv") {
      if (!need()) return 2;
      ok = parse_kv_dtype(v, &kv);
    } else if (a == "--bw-mib") {
      if (!need()) return 2;
      ok = parse_u32(v, &bw_mib) && bw_mib <= (1u << 16);
    } else if (a == "--spec-lookup") {
      if (!need()) return 2;
      ok = parse_u32_list(v, &o->spec_lookup);
      for (uint32_t k : o->spec_lookup) ok = ok && k >= 1 && k <= 64;
    } else if (a == "--verify") {
      if (!need()) return 2;
      ok = parse_u32_list(v, &o->verify);
      for (uint32_t k : o->verify) ok = ok && k >= 1 && k <= 64;
    } else if (a == "--snapshot") {
      o->snapshot = true;
    } else if (a == "--cancel") {
      o->cancel = true;
    } else if (a == "--beams") {
      if (!need()) return 2;
      ok = parse_u32_list(v, &o->beams);
      for (uint32_t b : o->beams) ok = ok && b >= 1 && b <= 16;
    } else {
      fprintf(stderr, "ringlm bench: unknown option '%s'\n\n%s", a.c_str(), kUsage);
      return 2;
    }
    if (!ok) {
      fprintf(stderr, "ringlm bench: bad value '%s' for %s\n", v ? v : "", a.c_str());
      return 2;
    }
  }
  if (model_path.empty() == synthetic.empty()) {
    fprintf(stderr, "ringlm bench: need exactly one of -m MODEL / --synthetic SPEC\n\n%s",
            kUsage);
    return 2;
  }
  if (!model_path.empty() && (quant_given || as_llama || layers || !o->vocab.empty())) {
    fprintf(stderr,
            "ringlm bench: --quant, --as-llama, --layers and --vocab apply to --synthetic only\n");
    return 2;
  }
  if (n_prompt == 0 && n_gen == 0) {
    fprintf(stderr, "ringlm bench: nothing to run (-p 0 and -n 0)\n");
    return 2;
  }
  if (!grammar_flags_check("bench", o->grammar)) return 2;
  if (o->grammar.any() && n_gen == 0) {
    fprintf(stderr, "ringlm bench: a grammar needs decode steps (-n > 0)\n");
    return 2;
  }
  if (threads.empty()) {
    threads.push_back(1);
    if (!loads.empty()) threads.push_back(2);  // --background: one thread against two
  }
  if (kernels.empty()) kernels.push_back("auto");
  if (backends.empty()) backends.push_back("native");
  if (o->depths.empty()) o->depths.push_back(0);

  return -1;
}

// The bytes to bench: a --synthetic model built in memory (its build time in *build_s) or the
// -m file mapped; *name is the table's model column. false with the message printed.
bool load_bench_model(const BenchOptions& o, ModelBytes* model_bytes, std::string* model_name,
                      double* build_s) {
  const std::string &model_path = o.model_path, &synthetic = o.synthetic;
  ModelBytes& bytes = *model_bytes;
  std::string& name = *model_name;
  const fb::DType quant = o.quant;
  const uint32_t layers = o.layers;
  std::string err;
  if (!synthetic.empty()) {
    conv::ModelData md;
    conv::SyntheticOptions so;
    std::vector<std::string> ignored;
    so.as_llama = o.as_llama;
    so.direct = true;  // matrices generated straight in the target encoding
    so.direct_type = quant;
    so.n_layers_override = layers;
    so.ignored = &ignored;
    so.name = &name;
    conv::TokenizerData vocab_data;
    if (!o.vocab.empty()) {
      std::string kind;
      if (!read_vocab_data(o.vocab, &vocab_data, &kind, &err)) {
        fprintf(stderr, "ringlm bench: --vocab: %s\n", err.c_str());
        return false;
      }
      so.vocab = &vocab_data;
    }
    if (!conv::synthetic_model(synthetic, o.seed, so, &md, &err)) {
      fprintf(stderr, "ringlm bench: %s\n", err.c_str());
      return false;
    }
    fb::DType base = quant;
    // The preset's matrices are generated directly in their own encodings too (load_raw_as).
    if (!o.preset.empty()) conv::apply_quant_preset(o.preset, &md, &base);
    for (const std::string& s : ignored)
      fprintf(stderr, "ringlm bench: --as-llama: ignoring %s\n", s.c_str());
    fprintf(stderr, "ringlm bench: building synthetic %s (%s)...\n", name.c_str(),
            o.preset.empty() ? conv::dtype_name(quant) : o.preset.c_str());
    const double t0 = now_s();
    if (!build_synthetic(md, base, &bytes, &err)) {
      fprintf(stderr, "ringlm bench: %s\n", err.c_str());
      return false;
    }
    *build_s = now_s() - t0;
    name = "synth " + name;
    if (layers) name += " " + std::to_string(layers) + "L";
  } else {
    if (!bytes.file.open(model_path, &err)) {
      fprintf(stderr, "ringlm bench: %s\n", err.c_str());
      return false;
    }
    name = model_path.substr(model_path.find_last_of('/') == std::string::npos
                                 ? 0
                                 : model_path.find_last_of('/') + 1);
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".rlm") == 0)
      name.resize(name.size() - 4);
  }
  return true;
}

}  // namespace

int cmd_bench(int argc, char** argv) {
  BenchOptions opts;
  if (const int rc = parse_bench_flags(argc, argv, &opts); rc >= 0) return rc;
  // -o json: stdout is the JSON document's alone; everything printed for people goes to stderr.
  int json_fd = -1;
  if (opts.json_output) {
    fflush(stdout);
    json_fd = dup(STDOUT_FILENO);
    if (json_fd < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
      fprintf(stderr, "ringlm bench: -o json: %s\n", strerror(errno));
      return 1;
    }
  }
  const std::string& synthetic = opts.synthetic;
  const uint32_t n_prompt = opts.n_prompt, n_gen = opts.n_gen, reps = opts.reps,
                 batch = opts.batch, bw_mib = opts.bw_mib;
  const std::vector<uint32_t>& threads = opts.threads;
  std::vector<uint32_t>& loads = opts.loads;
  const std::vector<std::string> &kernels = opts.kernels, &backends = opts.backends;
  const rlm_kv_dtype kv = opts.kv;
  const std::vector<uint32_t>& depths = opts.depths;
  const uint32_t max_depth = *std::max_element(depths.begin(), depths.end());

  // ---- model ----
  ModelBytes bytes;
  std::string name;
  double build_s = 0;
  if (!load_bench_model(opts, &bytes, &name, &build_s)) return 1;
  rlm_model model;
  const double t_open0 = now_s();
  rlm_status st = rlm_model_open(bytes.data(), bytes.size(), &model);
  const double open_s = now_s() - t_open0;
  if (st != RLM_OK) {
    fprintf(stderr, "ringlm bench: model: %s: %s\n", rlm_status_string(st),
            rlm_model_error(&model));
    return 1;
  }
  rlm_model_info info;
  rlm_model_info_default(&info);
  rlm_model_get_info(&model, &info);
  double params = 0;
  std::string wq;
  describe_weights(bytes.data(), &params, &wq);
  const std::string label = name + " " + wq;
  const std::string size_s = human_bytes(static_cast<double>(info.weight_bytes));
  const std::string params_s = human_params(params);

  // ---- runs ----
  rlm_session_config cfg;
  rlm_session_config_default(&cfg);
  // Every depth's session has this config: n_ctx and the batch sizes cover the largest depth.
  cfg.n_ctx = std::max<uint32_t>(max_depth + std::max(n_prompt, n_gen + 1), 2);
  uint32_t max_k = 0;
  for (uint32_t k : opts.spec_lookup) max_k = std::max(max_k, k);
  if (max_k && n_gen) {
    // The echo prompt (2 + n_gen tokens) and n_gen steps after it, without a wrap.
    cfg.n_ctx = std::max<uint32_t>(cfg.n_ctx, 2 * n_gen + 8 + max_k);
    cfg.max_draft = max_k;
    cfg.max_pending = std::max<uint32_t>(cfg.max_pending, n_gen + 2);
  }
  uint32_t max_v = 0;
  for (uint32_t k : opts.verify) max_v = std::max(max_v, k);
  // --verify: the passes run after vdepth tokens of context.
  const uint32_t vdepth = std::max<uint32_t>(max_depth, 16);
  if (max_v) {
    cfg.n_ctx = std::max<uint32_t>(cfg.n_ctx, vdepth + max_v + 2);
    cfg.max_logit_rows = std::max<uint32_t>(cfg.max_logit_rows, max_v + 1);
    cfg.max_pending = std::max<uint32_t>(cfg.max_pending, vdepth);
  }
  cfg.n_sink = std::min<uint32_t>(cfg.n_sink, cfg.n_ctx - 1);
  cfg.kv_dtype = kv;
  // The --depth prefill (untimed) runs in batches of up to 512 too.
  cfg.n_batch = batch ? batch
                      : std::min<uint32_t>(std::max<uint32_t>({n_prompt, max_depth, 1}), 512);
  if (max_v) cfg.n_batch = std::max<uint32_t>(cfg.n_batch, max_v + 1);
  cfg.max_pending = std::max<uint32_t>(cfg.max_pending, std::max(n_prompt, max_depth));
  rlm_sampling sp;
  rlm_sampling_default(&sp);
  sp.temperature = 0.0f;
  uint32_t max_beams = 0;
  for (uint32_t b : opts.beams) max_beams = std::max(max_beams, b);
  if (max_beams && n_gen) {
    cfg.max_beams = max_beams;
    cfg.max_beam_tokens = n_gen;
    cfg.n_ctx = std::max<uint32_t>(cfg.n_ctx, n_gen + 2);
  }
  CliGrammar grammar;
  if (opts.grammar.any()) {
    if (!grammar.compile("bench", opts.grammar, &model)) return 1;
    grammar_flags_apply(opts.grammar, &cfg);
    cfg.n_ctx = std::max<uint32_t>(cfg.n_ctx, n_gen + 2);
  }

  const bool load_column = !loads.empty();
  if (loads.empty()) loads.push_back(0);
  BenchReport report;
  report.load_column = load_column;
  report.roofline = opts.vs_roofline;
  report.info = info;
  report.kv = kv;
  report.n_gen = n_gen;
  const BenchEnvironment env = bench_environment(&model, cfg);
  print_environment(env);
  if (opts.vs_roofline) {
    // Before the runs, in a child process, so the buffers count in neither the runs' caches nor
    // the peak RSS reported below.
    fprintf(stderr, "ringlm bench: measuring memory bandwidth (--vs-roofline)...\n");
    report.bw = bandwidth_in_child(bw_mib ? bw_mib : 256, bandwidth_thread_counts(threads));
  }
  report.header();
  // One per configuration (load, kernels, backend, threads) and depth, in the table's order.
  struct RunResult {
    std::string backend;
    uint32_t threads = 0;
    bool supported = false;
    double tg_tps = 0;
    size_t session_bytes = 0;
    uint32_t load = 0;
    double pp_tps = 0;
    size_t config = 0;       // the configuration's index: its depths share it
    size_t depth_index = 0;  // into depths
    uint32_t depth = 0;
    std::vector<double> pp_reps, tg_reps;  // t/s of each repetition, for the depth ratios
    std::vector<double> tg_bw;  // --bw-each: read GB/s measured just before each tg repetition
  };
  uint32_t failed_rows = 0, rows_total = 0;
  size_t n_configs = 0;
  std::vector<RunResult> results;
  std::vector<std::string> spec_lines;  // --spec-lookup summaries, printed after the table
  // llama-bench's names: "pp512 @ d4096" for a test run after 4096 tokens of context.
  std::vector<std::string> pp_names, tg_names;  // per depth
  for (uint32_t d : depths) {
    const std::string at_depth =
        (d ? " @ d" + std::to_string(d) : "") + (opts.cpu_clock ? " (cpu)" : "");
    pp_names.push_back("pp" + std::to_string(n_prompt) + at_depth);
    tg_names.push_back("tg" + std::to_string(n_gen) + at_depth);
  }
  // The echo and beam rows run from an empty context: named after a tg row at depth 0.
  const std::string tg_name = "tg" + std::to_string(n_gen) + (opts.cpu_clock ? " (cpu)" : "");
  std::string auto_name;  // resolved once, when "auto" is asked for
  BackgroundLoad background;
  for (const uint32_t load : loads) {
    const int64_t load_cell = load_column ? static_cast<int64_t>(load) : -1;
    background.stop();
    if (load) {
      if (!background.start(load)) {
        fprintf(stderr, "ringlm bench: cannot start the background load: %s\n", strerror(errno));
        return 1;
      }
      std::string ids;
      for (pid_t pid : background.pids()) ids += " " + std::to_string(pid);
      fprintf(stderr, "ringlm bench: background load: %u busy process%s (pid%s)\n", load,
              load == 1 ? "" : "es", ids.c_str());
    }
    for (const std::string& kname : kernels) {
      const bool is_auto = kname == "auto";
      if (is_auto && auto_name.empty()) {
        auto_name = resolve_auto_kernels(&model, cfg);
        if (auto_name.empty()) auto_name = "auto";
      }
      cfg.kernels = is_auto ? nullptr : kname.c_str();
      const std::string cpu = "CPU/" + (is_auto ? auto_name : kname);
      for (const std::string& bname : backends) {
        cfg.backend = bname.c_str();
        const std::string backend = (bname == "xnnpack" ? "XNNPACK+" : "") + cpu;
        for (uint32_t nt : threads) {
          cfg.n_threads = nt;
          const size_t config = n_configs++;
          std::vector<RunResult> per(depths.size());
          for (size_t i = 0; i < depths.size(); ++i) {
            per[i].backend = backend;
            per[i].threads = nt;
            per[i].load = load;
            per[i].config = config;
            per[i].depth_index = i;
            per[i].depth = depths[i];
          }
          // One session per depth, each prefilled to its depth once (later repetitions rewind to
          // it: Runner::to_depth), so repetition r can run at every depth before repetition r + 1
          // without a prefill between. A session between its runs costs no CPU (its workers
          // sleep: platform/threads.h). The session's own failure is printed by open (naming the
          // config problem); the rows of this configuration are then reported failed and the
          // bench goes on.
          std::vector<CliSession> sessions(depths.size());
          const std::string who = "bench: " + backend + ", " + std::to_string(nt) + " thread(s)";
          bool opened = true;
          for (CliSession& session : sessions)
            opened = opened && session.open(who.c_str(), &model, cfg, nullptr);
          if (!opened) {
            for (size_t i = 0; i < depths.size(); ++i) {
              for (const bool prefill : {true, false}) {
                if ((prefill ? n_prompt : n_gen) == 0) continue;
                Row row;
                row.threads = nt;
                row.test = (prefill ? pp_names : tg_names)[i];
                row.depth = depths[i];
                report.row(label, size_s, params_s, backend, load_cell, row);
                ++failed_rows;
                ++rows_total;
              }
              results.push_back(per[i]);
            }
            continue;
          }
          std::vector<Runner> runs(depths.size());
          for (size_t i = 0; i < depths.size(); ++i) {
            if ((st = rlm_session_set_sampling(sessions[i].get(), &sp)) != RLM_OK) {
              fprintf(stderr, "ringlm bench: sampling: %s\n", rlm_status_string(st));
              return 1;
            }
            per[i].supported = true;
            per[i].session_bytes = sessions[i].bytes();
            runs[i].s = sessions[i].get();
            runs[i].vocab = info.vocab_size;
            runs[i].first_token = info.bos_id >= 0 ? info.bos_id : 0;
            runs[i].depth = depths[i];
            runs[i].cpu_clock = opts.cpu_clock;
          }
          double secs = 0;
          // Warm-up (untimed), every session: faults the weights in, settles clocks and
          // prefills the session to its depth.
          fprintf(stderr, "ringlm bench: %s, %u thread(s): warm-up...\n", backend.c_str(), nt);
          for (Runner& run : runs) {
            if ((n_prompt && !run.pp(n_prompt, &secs)) ||
                (n_gen && !run.tg(std::min(n_gen, 4u), &secs))) {
              fprintf(stderr, "ringlm bench: warm-up: %s\n", run.error.c_str());
              return 1;
            }
          }
          // `reps` timed runs of one test (pp or tg over n tokens) at every depth, interleaved:
          // repetition r at each depth before repetition r + 1, so drift of the machine reaches
          // every depth alike. (*tps)[i] gets depth i's tokens/s per repetition.
          auto measure = [&](const std::vector<std::string>& names, uint32_t n, bool prefill,
                             std::vector<std::vector<double>>* tps) {
            tps->assign(runs.size(), {});
            for (uint32_t r = 0; r < reps; ++r) {
              for (size_t i = 0; i < runs.size(); ++i) {
                if (!prefill && opts.bw_each) {
                  // In a child: its buffers never count in this process's peak RSS. 0 when
                  // it could not run (that repetition's share is then left out).
                  const std::vector<BandwidthResult> b =
                      bandwidth_in_child(bw_mib ? bw_mib : 256, {nt}, 2);
                  per[i].tg_bw.push_back(b.empty() ? 0.0 : b.front().read_gbs);
                }
                if (!(prefill ? runs[i].pp(n, &secs) : runs[i].tg(n, &secs))) {
                  fprintf(stderr, "ringlm bench: %s: %s\n", names[i].c_str(),
                          runs[i].error.c_str());
                  return false;
                }
                (*tps)[i].push_back(n / secs);
              }
            }
            return true;
          };
          std::vector<std::vector<double>> pp_tps, tg_tps;
          // Prints depth i's pp or tg row.
          auto print_row = [&](size_t i, bool prefill) {
            const std::vector<double>& v = (prefill ? pp_tps : tg_tps)[i];
            const Row row{nt, (prefill ? pp_names : tg_names)[i], true, stats_of(v), depths[i]};
            report.row(label, size_s, params_s, backend, load_cell, row);
            ++rows_total;
            (prefill ? per[i].pp_tps : per[i].tg_tps) = row.tps.mean;
            (prefill ? per[i].pp_reps : per[i].tg_reps) = v;
          };
          // The rows go depth by depth, pp then tg; the first depth's pp row is printed before
          // the tg runs (with one depth, every row as soon as it is measured).
          if (n_prompt) {
            if (!measure(pp_names, n_prompt, true, &pp_tps)) return 1;
            print_row(0, true);
          }
          if (n_gen) {
            if (!measure(tg_names, n_gen, false, &tg_tps)) return 1;
            print_row(0, false);
          }
          for (size_t i = 1; i < depths.size(); ++i) {
            if (n_prompt) print_row(i, true);
            if (n_gen) print_row(i, false);
          }
          // The tests below run once per configuration, on the first depth's session, from an
          // empty context (--depth applies to the pp and tg rows only).
          Runner& run = runs.front();
          rlm_session* const s = run.s;
          RunResult& rr = per.front();
          run.depth = 0;
          if (n_gen && max_k) {
            // The echo prompt: [start, G, start] with G the greedy output of tgN.
            std::vector<int32_t> prompt{run.first_token}, g, plain, spec;
            rlm_spec_stats stats;
            if (!run.echo(prompt, n_gen, 0, &secs, &g, &stats)) {
              fprintf(stderr, "ringlm bench: echo: %s\n", run.error.c_str());
              return 1;
            }
            prompt.insert(prompt.end(), g.begin(), g.end());
            prompt.push_back(run.first_token);
            const std::string echo_name = "echo " + tg_name;
            std::vector<double> v;
            for (uint32_t r = 0; r < reps; ++r) {
              if (!run.echo(prompt, n_gen, 0, &secs, &plain, &stats)) {
                fprintf(stderr, "ringlm bench: %s: %s\n", echo_name.c_str(), run.error.c_str());
                return 1;
              }
              v.push_back(n_gen / secs);
            }
            const Row plain_row{nt, echo_name, true, stats_of(v)};
            report.row(label, size_s, params_s, backend, load_cell, plain_row);
            ++rows_total;
            for (uint32_t k : opts.spec_lookup) {
              v.clear();
              for (uint32_t r = 0; r < reps; ++r) {
                if (!run.echo(prompt, n_gen, k, &secs, &spec, &stats)) {
                  fprintf(stderr, "ringlm bench: %s lookup%u: %s\n", echo_name.c_str(), k,
                          run.error.c_str());
                  return 1;
                }
                v.push_back(n_gen / secs);
              }
              const Row spec_row{nt, echo_name + " lookup" + std::to_string(k), true,
                                 stats_of(v)};
              report.row(label, size_s, params_s, backend, load_cell, spec_row);
              ++rows_total;
              // Passes that ran the model: verification passes, plus plain steps (no draft).
              const double passes = static_cast<double>(n_gen - stats.accepted);
              const double per_pass = passes > 0 ? n_gen / passes : 0.0;
              const double speedup = spec_row.tps.mean / plain_row.tps.mean;
              char line[256];
              snprintf(line, sizeof line,
                       "echo lookup%u (%s, %u thread%s): %.1f %% of %llu drafts accepted, %.2f "
                       "tokens per target pass, speed-up %.2fx, a pass costs %.2f one-token "
                       "passes, tokens %s",
                       k, backend.c_str(), nt, nt == 1 ? "" : "s",
                       stats.drafted ? 100.0 * stats.accepted / stats.drafted : 0.0,
                       static_cast<unsigned long long>(stats.drafted), per_pass, speedup,
                       speedup > 0 ? per_pass / speedup : 0.0,
                       spec == plain ? "identical" : "DIFFERENT");
              spec_lines.push_back(line);
              if (spec != plain) ++failed_rows;
            }
            // Speculation off again: the rows after these (beams' alternated tg runs, the
            // grammar rows) time plain decoding.
            rlm_speculation off;
            rlm_speculation_default(&off);
            off.mode = RLM_SPEC_OFF;
            if ((st = rlm_session_set_speculation(s, &off)) != RLM_OK) {
              fprintf(stderr, "ringlm bench: speculation off: %s\n", rlm_status_string(st));
              return 1;
            }
          }
          if (n_prompt && opts.snapshot) {
            // The ppN state: prefill (timed by the pp row above), then save and restore.
            std::vector<double> save_s, restore_s;
            std::vector<uint8_t> snap;
            for (uint32_t r = 0; r < reps; ++r) {
              if (!run.pp(n_prompt, &secs)) {
                fprintf(stderr, "ringlm bench: snapshot: %s\n", run.error.c_str());
                return 1;
              }
              size_t need = 0, n = 0;
              rlm_session_snapshot_bytes(s, &need);
              snap.resize(need);
              double t0 = now_s();
              st = rlm_session_save(s, snap.data(), snap.size(), &n);
              save_s.push_back(now_s() - t0);
              rlm_session_reset(s);
              t0 = now_s();
              if (st == RLM_OK) st = rlm_session_restore(s, snap.data(), n);
              restore_s.push_back(now_s() - t0);
              if (st != RLM_OK || rlm_session_position(s) != n_prompt) {
                fprintf(stderr, "ringlm bench: snapshot: %s: %s\n", rlm_status_string(st),
                        rlm_session_error(s));
                return 1;
              }
            }
            std::sort(save_s.begin(), save_s.end());
            std::sort(restore_s.begin(), restore_s.end());
            const double prefill = rr.pp_tps > 0 ? n_prompt / rr.pp_tps : 0.0;
            const double restore = restore_s[restore_s.size() / 2];
            char line[256];
            snprintf(line, sizeof line,
                     "snapshot of pp%u (%s, %u thread%s): %zu bytes, save %.2f ms, restore %.2f "
                     "ms (median) against prefill %.1f ms: %.0fx faster",
                     n_prompt, backend.c_str(), nt, nt == 1 ? "" : "s", snap.size(),
                     1e3 * save_s[save_s.size() / 2], 1e3 * restore, 1e3 * prefill,
                     restore > 0 ? prefill / restore : 0.0);
            spec_lines.push_back(line);
          }
          if (n_prompt && opts.cancel) {
            // Halfway through a prefill, from another thread: the time until eval returns.
            const double prefill = rr.pp_tps > 0 ? n_prompt / rr.pp_tps : 0.0;
            std::vector<double> lat;
            uint32_t landed = 0;
            for (uint32_t r = 0; r < reps; ++r) {
              rlm_session_reset(s);
              std::vector<int32_t> ids(n_prompt);
              for (int32_t& t : ids) t = run.random_token();
              rlm_session_feed_tokens(s, ids.data(), ids.size());
              std::atomic<double> cancelled_at{0.0};
              std::thread canceller([&] {
                std::this_thread::sleep_for(std::chrono::duration<double>(prefill / 2));
                cancelled_at = now_s();
                rlm_session_cancel(s);
              });
              st = rlm_session_eval(s);
              const double returned = now_s();
              canceller.join();
              if (st == RLM_ERR_CANCELLED) {
                ++landed;
                lat.push_back(returned - cancelled_at.load());
              }
            }
            std::sort(lat.begin(), lat.end());
            char line[256];
            snprintf(line, sizeof line,
                     "cancel during pp%u (%s, %u thread%s): eval returned %.2f ms after "
                     "rlm_session_cancel (median; max %.2f ms; %u of %u cancels landed)",
                     n_prompt, backend.c_str(), nt, nt == 1 ? "" : "s",
                     lat.empty() ? 0.0 : 1e3 * lat[lat.size() / 2],
                     lat.empty() ? 0.0 : 1e3 * lat.back(), landed, reps);
            spec_lines.push_back(line);
          }
          if (n_gen && max_beams) {
            // Each width: reps searches of n_gen tokens after the start token (run untimed
            // first, so the search times its own steps only).
            rlm_session_set_ignore_eos(s, 1);
            for (uint32_t width : opts.beams) {
              rlm_beam_params bp;
              rlm_beam_params_default(&bp);
              bp.n_beams = width;
              bp.max_tokens = n_gen;
              bp.length_penalty = 0.0f;
              std::vector<int32_t> out(n_gen);
              rlm_beam_result res;
              rlm_beam_result_default(&res);
              res.tokens = out.data();
              res.capacity = n_gen;
              std::vector<double> v, plain;  // beam steps / s, and tg's steps / s alternated
              for (uint32_t r = 0; r < reps; ++r) {
                double tg_s = 0;
                if (!run.tg(n_gen, &tg_s)) {
                  fprintf(stderr, "ringlm bench: beam%u: tg: %s\n", width, run.error.c_str());
                  return 1;
                }
                plain.push_back(n_gen / tg_s);
                rlm_session_set_ignore_eos(s, 1);
                uint32_t n_res = 0;
                rlm_session_reset(s);
                st = rlm_session_feed_tokens(s, &run.first_token, 1);
                if (st == RLM_OK) st = rlm_session_eval(s);
                const double t0 = now_s();
                if (st == RLM_OK) st = rlm_session_beam_search(s, &bp, &res, &n_res);
                const double dt = now_s() - t0;
                if (st != RLM_OK) {
                  fprintf(stderr, "ringlm bench: beam%u: %s: %s\n", width, rlm_status_string(st),
                          rlm_session_error(s));
                  return 1;
                }
                // n_gen - 1 passes (the first token's distribution is the prompt's).
                v.push_back((n_gen - 1) / dt);
              }
              const Row beam_row{nt, tg_name + " beam" + std::to_string(width), true, stats_of(v)};
              report.row(label, size_s, params_s, backend, load_cell, beam_row);
              ++rows_total;
              // Medians of the alternated runs: the VM's bandwidth drifts between rows.
              const double beam_med = median_of(v), plain_med = median_of(plain);
              char line[240];
              snprintf(line, sizeof line,
                       "beam%u (%s, %u thread%s): one step (%u beams in one pass + selection) "
                       "costs %.2f one-token decode steps (medians of %u alternated tg%u / beam "
                       "runs)",
                       width, backend.c_str(), nt, nt == 1 ? "" : "s", width,
                       plain_med / beam_med, reps, n_gen);
              spec_lines.push_back(line);
            }
            rlm_session_set_ignore_eos(s, 0);
          }
          if (!opts.verify.empty()) {
            // The context: vdepth random tokens, then per K one (K+1)-token pass and one
            // one-token pass, alternated, each rewound to the same position.
            rlm_session_reset(s);
            std::vector<int32_t> ctx(vdepth);
            for (int32_t& t : ctx) t = run.random_token();
            st = rlm_session_feed_tokens(s, ctx.data(), ctx.size());
            if (st == RLM_OK) st = rlm_session_eval(s);
            const uint32_t base = rlm_session_position(s);
            for (uint32_t k : opts.verify) {
              std::vector<int32_t> toks(k + 1);
              for (int32_t& t : toks) t = run.random_token();
              std::vector<double> one, many;
              double sum = 0;
              for (uint32_t r = 0; st == RLM_OK && r < reps * 20; ++r) {
                for (uint32_t n : {1u, k + 1}) {
                  // Back to base - 1, then the last context token scored untimed: the logits of
                  // position base are ready, so the timed call runs exactly one pass of n tokens.
                  if ((st = rlm_session_rewind(s, base - 1)) != RLM_OK ||
                      (st = rlm_session_score(s, &ctx.back(), 1, nullptr, nullptr, &sum)) != RLM_OK)
                    break;
                  const double t0 = run.clock_s();
                  if ((st = rlm_session_score(s, toks.data(), n, nullptr, nullptr, nullptr)) != RLM_OK)
                    break;
                  (n == 1 ? one : many).push_back(run.clock_s() - t0);
                }
              }
              if (st != RLM_OK) {
                fprintf(stderr, "ringlm bench: verify1+%u: %s: %s\n", k, rlm_status_string(st),
                        rlm_session_error(s));
                return 1;
              }
              const double m1 = median_of(one), mk = median_of(many);
              char line[256];
              snprintf(line, sizeof line,
                       "verify 1+%u (%s, %u thread%s, at position %u): a pass of %u tokens "
                       "%.3f ms, a one-token pass %.3f ms (medians of %zu alternated): %.2fx",
                       k, backend.c_str(), nt, nt == 1 ? "" : "s", base, k + 1, 1e3 * mk,
                       1e3 * m1, one.size(), mk / m1);
              spec_lines.push_back(line);
            }
          }
          if (grammar.get() &&
              !grammar_rows(report, run, grammar.get(), grammar.compile_s(), grammar.bytes(), &model, cfg,
                            n_gen, reps, nt,
                            backend, label, size_s, params_s, load_cell, &rows_total,
                            &spec_lines)) {
            return 1;
          }
          results.insert(results.end(), per.begin(), per.end());
        }
      }
    }
  }
  background.stop();
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  const double peak_rss = static_cast<double>(ru.ru_maxrss) * 1024.0;  // KiB on Linux

  // ---- memory bandwidth (after the peak RSS reading: its buffers are not the model's) ----
  std::vector<BandwidthResult> bw = report.bw;  // --vs-roofline measured it already
  if (bw_mib && !opts.vs_roofline) {
    fprintf(stderr, "ringlm bench: measuring memory bandwidth...\n");
    for (uint32_t c : bandwidth_thread_counts(threads)) {
      BandwidthResult b;
      if (measure_bandwidth(static_cast<size_t>(bw_mib) << 20, c, 5, &b)) bw.push_back(b);
    }
  }
  auto bw_for = [&](uint32_t t) -> const BandwidthResult* {
    for (const BandwidthResult& b : bw)
      if (b.threads == t) return &b;
    return nullptr;
  };

  printf("\n");
  nlohmann::json bw_each_json = nlohmann::json::array();  // --bw-each shares, per decode row
  for (const RunResult& r : results) {
    if (!r.supported || n_gen == 0) continue;
    // At a depth, each step also reads the K and V rows of every position before it.
    const double decode_bytes = report.decode_bytes(r.depth);
    const double kv_read = decode_bytes - static_cast<double>(info.weight_bytes);
    const double gbs = decode_bytes * r.tg_tps * 1e-9;
    char load_note[64] = "";
    if (load_column) snprintf(load_note, sizeof load_note, ", load %u", r.load);
    if (depths.size() > 1) {
      const size_t at = strlen(load_note);
      snprintf(load_note + at, sizeof load_note - at, ", depth %u", r.depth);
    }
    if (r.depth) {
      printf("decode (%s, %u thread%s%s): %.2f GB/s effective traffic ((%s weights + %s KV) x "
             "%.2f t/s)",
             r.backend.c_str(), r.threads, r.threads == 1 ? "" : "s", load_note, gbs,
             size_s.c_str(), human_bytes(kv_read).c_str(), r.tg_tps);
    } else {
      printf("decode (%s, %u thread%s%s): %.2f GB/s effective weight traffic (%s x %.2f t/s)",
             r.backend.c_str(), r.threads, r.threads == 1 ? "" : "s", load_note, gbs,
             size_s.c_str(), r.tg_tps);
    }
    if (const BandwidthResult* b = bw_for(r.threads)) {
      printf(" = %.1f%% of triad %.2f GB/s, %.1f%% of read %.2f GB/s",
             b->triad_gbs > 0 ? 100.0 * gbs / b->triad_gbs : 0.0, b->triad_gbs,
             b->read_gbs > 0 ? 100.0 * gbs / b->read_gbs : 0.0, b->read_gbs);
    }
    printf("\n");
    // --bw-each: repetition k's bytes x t/s over the read bandwidth measured just before it.
    std::vector<double> shares;
    for (size_t k = 0; k < std::min(r.tg_bw.size(), r.tg_reps.size()); ++k) {
      if (r.tg_bw[k] > 0) shares.push_back(100.0 * decode_bytes * r.tg_reps[k] * 1e-9 / r.tg_bw[k]);
    }
    if (!shares.empty()) {
      std::vector<double> bws;
      for (double b : r.tg_bw)
        if (b > 0) bws.push_back(b);
      const double med = median_of(shares);
      printf("decode (%s, %u thread%s%s): %.1f%% of the read bandwidth measured just before each "
             "repetition (median of %zu; range %.1f-%.1f%%; read %.2f-%.2f GB/s)\n",
             r.backend.c_str(), r.threads, r.threads == 1 ? "" : "s", load_note, med,
             shares.size(), *std::min_element(shares.begin(), shares.end()),
             *std::max_element(shares.begin(), shares.end()),
             *std::min_element(bws.begin(), bws.end()), *std::max_element(bws.begin(), bws.end()));
      nlohmann::json o = {{"backend", r.backend}, {"threads", r.threads}, {"depth", r.depth},
                          {"load", r.load}, {"read_share_pct_median", med},
                          {"read_share_pct_reps", shares}, {"read_gbs_reps", bws}};
      bw_each_json.push_back(o);
    }
  }
  // -d LIST: each further depth against the first, per configuration and test. The ratio of
  // the means, and of the repetitions taken in pairs (repetition r at this depth over repetition
  // r at the first, run one after the other): drift of the machine between pairs cancels out of
  // each pair, so their median and range show how far the ratio can be trusted.
  nlohmann::json depth_ratios = nlohmann::json::array();
  for (const RunResult& r : results) {
    if (!r.supported || r.depth_index == 0) continue;
    const RunResult* first = nullptr;
    for (const RunResult& o : results)
      if (o.config == r.config && o.depth_index == 0) first = &o;
    if (!first || !first->supported) continue;
    char load_note[48] = "";
    if (load_column) snprintf(load_note, sizeof load_note, ", load %u", r.load);
    for (const bool prefill : {true, false}) {
      if ((prefill ? n_prompt : n_gen) == 0) continue;
      const std::vector<double>& at = prefill ? r.pp_reps : r.tg_reps;
      const std::vector<double>& base = prefill ? first->pp_reps : first->tg_reps;
      std::vector<double> pairs;
      for (size_t i = 0; i < std::min(at.size(), base.size()); ++i)
        pairs.push_back(at[i] / base[i]);
      if (pairs.empty()) continue;
      const double ratio = prefill ? r.pp_tps / first->pp_tps : r.tg_tps / first->tg_tps;
      const double lo = *std::min_element(pairs.begin(), pairs.end());
      const double hi = *std::max_element(pairs.begin(), pairs.end());
      const std::string& test = (prefill ? pp_names : tg_names)[r.depth_index];
      const std::string& base_test = (prefill ? pp_names : tg_names)[0];
      printf("depth (%s, %u thread%s%s): %s / %s = %.2f (median of %zu interleaved repetition "
             "pair%s %.2f, range %.2f–%.2f)",
             r.backend.c_str(), r.threads, r.threads == 1 ? "" : "s", load_note, test.c_str(),
             base_test.c_str(), ratio, pairs.size(), pairs.size() == 1 ? "" : "s",
             median_of(pairs), lo, hi);
      nlohmann::json o = {{"backend", r.backend}, {"threads", r.threads}, {"test", test},
                          {"depth", r.depth},     {"base_depth", first->depth},
                          {"ratio", ratio},       {"pair_median", median_of(pairs)},
                          {"pair_min", lo},       {"pair_max", hi}};
      if (load_column) o["load"] = r.load;
      if (!prefill) {
        // Decode reads the weights and the KV rows once per token: bound by bandwidth, its
        // t/s scale inversely with those bytes.
        const double from = report.decode_bytes(first->depth), to = report.decode_bytes(r.depth);
        printf("; bytes read per token %s -> %s: a bandwidth-bound decode would give %.2f",
               human_bytes(from).c_str(), human_bytes(to).c_str(), from / to);
        o["roofline_ratio"] = from / to;
      }
      printf("\n");
      depth_ratios.push_back(o);
    }
  }
  // --background: each thread count against one thread, per load, backend column and depth.
  if (load_column) {
    for (const RunResult& r : results) {
      if (!r.supported || r.threads == 1) continue;
      const RunResult* one = nullptr;
      for (const RunResult& o : results)
        if (o.supported && o.threads == 1 && o.load == r.load && o.backend == r.backend &&
            o.depth == r.depth)
          one = &o;
      if (!one) continue;
      printf("load %u (%s): %u threads vs 1:", r.load, r.backend.c_str(), r.threads);
      if (n_prompt)
        printf(" %s %.2f vs %.2f t/s (%+.1f%%)", pp_names[r.depth_index].c_str(), r.pp_tps,
               one->pp_tps, 100.0 * (r.pp_tps / one->pp_tps - 1.0));
      if (n_gen)
        printf("%s %s %.2f vs %.2f t/s (%+.1f%%)", n_prompt ? "," : "",
               tg_names[r.depth_index].c_str(), r.tg_tps, one->tg_tps,
               100.0 * (r.tg_tps / one->tg_tps - 1.0));
      printf("\n");
    }
  }
  for (const std::string& l : spec_lines) printf("%s\n", l.c_str());
  if (n_gen && info.weight_bytes < kCacheSized)
    printf("note: the weights (%s) fit in a last-level cache; decode here is bound by compute "
           "and per-token overhead, not by DRAM bandwidth\n",
           size_s.c_str());
  if (!bw.empty()) {
    printf("memory bandwidth (%u MiB buffers, best of 5):", bw_mib);
    for (size_t i = 0; i < bw.size(); ++i) {
      printf("%s %u thread%s read %.2f GB/s (1 / 4 streams a thread %.2f / %.2f), triad %.2f GB/s",
             i ? ";" : "", bw[i].threads, bw[i].threads == 1 ? "" : "s", bw[i].read_gbs,
             bw[i].read1_gbs, bw[i].read4_gbs, bw[i].triad_gbs);
    }
    printf("\n");
  }
  printf("model open: %.2f ms", open_s * 1e3);
  if (!synthetic.empty()) printf(" (synthetic build %.2f s)", build_s);
  printf(" | file %s | weights %s", human_bytes(static_cast<double>(bytes.size())).c_str(),
         size_s.c_str());
  std::vector<std::string> shown;  // session bytes once per backend column (its first run)
  for (const RunResult& r : results) {
    if (!r.supported || std::find(shown.begin(), shown.end(), r.backend) != shown.end()) continue;
    shown.push_back(r.backend);
    // -d LIST: one session per depth, each of this size.
    const std::string per_depth =
        depths.size() > 1 ? " x " + std::to_string(depths.size()) + " depths" : "";
    printf(" | session %s%s%s%s (n_ctx %u, n_batch %u, kv %s)",
           human_bytes(static_cast<double>(r.session_bytes)).c_str(), per_depth.c_str(),
           backends.size() > 1 || kernels.size() > 1 ? " " : "",
           backends.size() > 1 || kernels.size() > 1 ? r.backend.c_str() : "", cfg.n_ctx,
           cfg.n_batch, kv_dtype_name(kv));
  }
  printf(" | peak RSS %s\n", human_bytes(peak_rss).c_str());
  fflush(stdout);
  if (json_fd >= 0) {
    nlohmann::json j;
    j["environment"] = {{"cpu", env.cpu},
                        {"cpus_online", env.cpus_online},
                        {"features", env.features},
                        {"kernels_auto", env.auto_kernels},
                        {"kernels_runnable", env.runnable}};
    j["model"] = {{"name", label},
                  {"weight_bytes", info.weight_bytes},
                  {"params", params},
                  {"n_layers", info.n_layers},
                  {"vocab_size", info.vocab_size}};
    // "depth": the largest of "depths" (what one -d gave before it took a list).
    j["config"] = {{"n_prompt", n_prompt}, {"n_gen", n_gen},  {"depth", max_depth},
                   {"depths", depths},     {"repetitions", reps},  {"n_ctx", cfg.n_ctx},
                   {"n_batch", cfg.n_batch}, {"kv", kv_dtype_name(kv)},
                   {"clock", opts.cpu_clock ? "cpu" : "wall"}};
    // At "depth"; each decode row has its own.
    j["decode_bytes_per_token"] = report.decode_bytes(max_depth);
    nlohmann::json rows = nlohmann::json::array();
    for (const BenchReport::Rec& r : report.rows) {
      nlohmann::json o = {{"backend", r.backend}, {"threads", r.threads}, {"test", r.test},
                          {"depth", r.depth},     {"supported", r.supported}};
      if (r.load >= 0) o["load"] = r.load;
      if (r.supported) {
        o["tps_mean"] = r.mean;
        o["tps_sd"] = r.sd;
      }
      if (r.supported && r.decode_bytes >= 0) o["decode_bytes_per_token"] = r.decode_bytes;
      if (r.roofline_pct >= 0) o["vs_roofline_pct"] = r.roofline_pct;
      rows.push_back(o);
    }
    j["rows"] = rows;
    j["depth_ratios"] = depth_ratios;
    if (opts.bw_each) j["decode_read_share"] = bw_each_json;
    nlohmann::json bws = nlohmann::json::array();
    for (const BandwidthResult& b : bw)
      bws.push_back({{"threads", b.threads},
                     {"read_gbs", b.read_gbs},
                     {"read1_gbs", b.read1_gbs},
                     {"read4_gbs", b.read4_gbs},
                     {"triad_gbs", b.triad_gbs}});
    j["bandwidth"] = bws;
    j["peak_rss_bytes"] = peak_rss;
    j["open_ms"] = open_s * 1e3;
    const std::string doc = j.dump(2) + "\n";
    size_t done = 0;
    while (done < doc.size()) {
      const ssize_t w = write(json_fd, doc.data() + done, doc.size() - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        fprintf(stderr, "ringlm bench: -o json: cannot write stdout: %s\n", strerror(errno));
        return 1;
      }
      done += static_cast<size_t>(w);
    }
  }
  if (failed_rows) {
    fprintf(stderr, "ringlm bench: %u of %u rows did not run\n", failed_rows, rows_total);
    return 1;
  }
  return 0;
}
