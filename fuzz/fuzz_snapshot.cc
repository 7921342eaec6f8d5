// Session snapshots (#17): restore must refuse every damaged snapshot with a named error and
// leave the session unchanged, and whatever it accepts must be safe to continue from.
//
// A small random model runs a session for a few steps (ring of 8..40 slots, f32 or f16 K/V,
// random sampling), saves a snapshot, then, by mode:
//   0  flips: 1..8 bytes xor'ed with non-zero values → RLM_ERR_SNAPSHOT_CORRUPT / _MISMATCH,
//      the target session saves to the same bytes as before;
//   1  truncation or extension to any length → RLM_ERR_SNAPSHOT_CORRUPT, target unchanged;
//   2  the rest of the input overwrites the body from an offset, then the checksum and size are
//      fixed up: past the checksum, the value checks must hold — a refusal is named and changes
//      nothing; an accepted snapshot continues for 24 steps with tokens in range and valid text;
//   3  the intact snapshot restores and continues exactly as the original session.
// Input: [mode][n_ctx][kv][steps][seed][offset: u16] then mode bytes.
#include <math.h>
#include <string.h>

#include <string>
#include <vector>

#include "fixtures.h"
#include "fuzz_common.h"

using namespace ringlm_fuzz;

namespace {

ringlm_test::AlignedBuffer* model_bytes;
rlm_model model;
uint32_t vocab = 0;

void build_model() {
  ringlm_test::RandomModelShape shape;
  shape.dim = 32;
  shape.n_layers = 2;
  shape.n_heads = 4;
  shape.n_kv_heads = 2;
  shape.ffn_dim = 40;
  shape.max_context = 64;
  shape.seed = 555;
  model_bytes = new ringlm_test::AlignedBuffer;
  std::string err;
  if (!ringlm_test::random_model(shape, ringlm::internal::fb::DType::F32, model_bytes, &err) ||
      rlm_model_open(model_bytes->data(), model_bytes->size(), &model) != RLM_OK) {
    fprintf(stderr, "fuzz_snapshot: model build failed: %s\n", err.c_str());
    abort();
  }
  rlm_model_info info;
  rlm_model_info_default(&info);
  rlm_model_get_info(&model, &info);
  vocab = info.vocab_size;
}

struct Session {
  Aligned mem;
  rlm_session* s = nullptr;
  ~Session() {
    if (s) rlm_session_release(s);
  }
  bool init(const rlm_session_config& c) {
    size_t need = 0, align = 0;
    if (rlm_session_memory(&model, &c, &need, &align) != RLM_OK) return false;
    mem.resize_fill(need, 0x5A);
    return rlm_session_init(&model, &c, mem.data(), need, &s) == RLM_OK;
  }
};

std::vector<uint8_t> save(rlm_session* s) {
  size_t need = 0;
  FUZZ_CHECK(rlm_session_snapshot_bytes(s, &need) == RLM_OK, "snapshot_bytes");
  std::vector<uint8_t> b(need);
  size_t n = 0;
  FUZZ_CHECK(rlm_session_save(s, b.data(), b.size(), &n) == RLM_OK && n == need, "save");
  return b;
}

// Steps `n` times (feeding a byte after a stop); returns the tokens (checked in range).
std::vector<int32_t> run(rlm_session* s, uint32_t n) {
  std::vector<int32_t> out;
  rlm_step_result r;
  rlm_step_result_default(&r);
  for (uint32_t i = 0; i < n; ++i) {
    const rlm_status st = rlm_step(s, &r);
    if (st != RLM_OK) {
      out.push_back(-1000 - st);
      if (rlm_session_feed_text(s, "q", 1) != RLM_OK) break;
      continue;
    }
    FUZZ_CHECK(r.token >= 0 && static_cast<uint32_t>(r.token) < vocab, "token %d", r.token);
    FUZZ_CHECK(r.text_len == 0 || r.text != nullptr, "text");
    out.push_back(r.token);
    if (r.stop != RLM_STOP_NONE) rlm_session_feed_text(s, "q", 1);
  }
  return out;
}

bool refused(rlm_status st) {
  return st == RLM_ERR_SNAPSHOT_CORRUPT || st == RLM_ERR_SNAPSHOT_MISMATCH || st == RLM_ERR_CAPACITY;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  build_model();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (!model_bytes) build_model();
  Reader in(data, size);
  const uint8_t mode = in.u8() % 4;
  rlm_session_config c;
  rlm_session_config_default(&c);
  c.n_ctx = in.range(8, 40);
  c.n_sink = 2;
  c.kv_dtype = static_cast<rlm_kv_dtype>(in.u8() % 3);  // f32, f16, q8
  c.max_pending = 64;
  c.max_stop_strings = 2;
  c.stop_string_bytes = 16;
  const uint32_t steps = in.range(0, 60);
  rlm_sampling sp;
  rlm_sampling_default(&sp);
  sp.seed = in.u8();
  sp.temperature = (sp.seed & 1) ? 0.0f : 0.9f;
  const uint32_t offset = in.u16();

  Session a, b;
  if (!a.init(c) || !b.init(c)) return 0;
  rlm_session_set_sampling(a.s, &sp);
  rlm_session_add_stop_string(a.s, "zz", 2);
  rlm_session_feed_text(a.s, "hello", 5);
  run(a.s, steps);
  std::vector<uint8_t> snap = save(a.s);
  // The target session has state of its own.
  rlm_session_feed_text(b.s, "abc", 3);
  run(b.s, 5);
  const std::vector<uint8_t> before = save(b.s);

  std::vector<uint8_t> bad = snap;
  bool changed = false;
  if (mode == 0) {
    const uint32_t flips = 1 + in.u8() % 8;
    for (uint32_t i = 0; i < flips; ++i) {
      const size_t at = in.u32() % bad.size();
      const uint8_t x = static_cast<uint8_t>(in.u8() | 1);
      bad[at] ^= x;
    }
    changed = bad != snap;
  } else if (mode == 1) {
    const size_t len = in.u32() % (snap.size() * 2 + 1);
    bad.resize(len, 0);
    changed = len != snap.size();
  } else if (mode == 2) {
    // Overwrite from `offset` with the input, then fix the size and checksum fields (the
    // header's first 32 bytes: magic 8, version 4, header bytes 4, total 8, checksum 8).
    const std::string rest = in.rest();
    const size_t at = offset % bad.size();
    for (size_t i = 0; i < rest.size() && at + i < bad.size(); ++i) bad[at + i] = rest[i];
    if (bad.size() >= 32) {
      const uint64_t total = bad.size();
      memcpy(bad.data() + 16, &total, 8);
      uint64_t h = 0xcbf29ce484222325ull;
      size_t i = 32;
      for (; i + 8 <= bad.size(); i += 8) {
        uint64_t w;
        memcpy(&w, bad.data() + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
      }
      for (; i < bad.size(); ++i) h = (h ^ bad[i]) * 0x100000001b3ull;
      memcpy(bad.data() + 24, &h, 8);
    }
    changed = true;  // may equal the original; then it restores
  }

  const rlm_status st = rlm_session_restore(b.s, bad.data(), bad.size());
  if (mode == 3 || (!changed && mode != 2)) {
    FUZZ_CHECK(st == RLM_OK, "intact snapshot refused: %s", rlm_status_string(st));
    // The restored session continues as the original.
    FUZZ_CHECK(run(b.s, 24) == run(a.s, 24), "restored session diverged");
    return 0;
  }
  if (mode != 2) {
    FUZZ_CHECK(refused(st), "damaged snapshot (mode %u) not refused: %s", mode,
               rlm_status_string(st));
  }
  if (st != RLM_OK) {
    FUZZ_CHECK(refused(st), "unnamed refusal %d", st);
    FUZZ_CHECK(save(b.s) == before, "a refused restore changed the session");
    return 0;
  }
  // Accepted (mode 2): whatever it restored must be safe to run.
  run(b.s, 24);
  return 0;
}
