// Speculative decoding, differentially: one random program of C-ABI calls runs on a plain session
// and on a session with a drafter (prompt lookup, or a draft session on another random model of
// the same vocabulary, so its drafts are effectively random tokens), and everything the caller
// can observe must be identical: statuses, tokens, positions, released text, stop reasons and
// the logits bit for bit. Programs stop inside accepted runs (stop tokens and strings, max tokens),
// rewind and feed in the middle of a pass, change sampling, reset, and switch the drafter.
// Small rings (16..64 slots) wrap within a few steps.
//
// Input: [model][draft model][mode][max_draft][n_ctx][sampling seed][greedy] then ops:
// [opcode][argument].
#include <math.h>

#include <memory>

#include "fixtures.h"
#include "fuzz_common.h"

using namespace ringlm_fuzz;

namespace {

struct Model {
  ringlm_test::AlignedBuffer bytes;
  rlm_model m;
  uint32_t vocab = 0;
};

Model* models[3];

void build_models() {
  const ringlm::internal::fb::DType q[3] = {ringlm::internal::fb::DType::F32,
                                            ringlm::internal::fb::DType::Q8,
                                            ringlm::internal::fb::DType::Q4};
  for (int i = 0; i < 3; ++i) {
    ringlm_test::RandomModelShape shape;
    shape.dim = 32;
    shape.n_layers = 2;
    shape.n_heads = 4;
    shape.n_kv_heads = 2;
    shape.ffn_dim = 40;
    shape.max_context = 128;
    shape.seed = 91 + i;
    models[i] = new Model;
    std::string err;
    if (!ringlm_test::random_model(shape, q[i], &models[i]->bytes, &err) ||
        rlm_model_open(models[i]->bytes.data(), models[i]->bytes.size(), &models[i]->m) != RLM_OK) {
      fprintf(stderr, "fuzz_speculative: model build failed: %s\n", err.c_str());
      abort();
    }
    rlm_model_info info;
    rlm_model_info_default(&info);
    rlm_model_get_info(&models[i]->m, &info);
    models[i]->vocab = info.vocab_size;
  }
}

struct Session {
  Aligned mem;
  rlm_session* s = nullptr;
  ~Session() {
    if (s) rlm_session_release(s);
  }
  bool init(const rlm_model* m, const rlm_session_config& c) {
    size_t bytes = 0, align = 0;
    if (rlm_session_memory(m, &c, &bytes, &align) != RLM_OK) return false;
    mem.resize_fill(bytes, 0xA5);
    return rlm_session_init(m, &c, mem.data(), bytes, &s) == RLM_OK;
  }
};

// What a call showed the caller.
struct Seen {
  rlm_status st = RLM_OK;
  int32_t token = 0;
  uint32_t position = 0, session_position = 0;
  std::string text;
  int stop = 0;
  bool operator==(const Seen& o) const {
    return st == o.st && token == o.token && position == o.position &&
           session_position == o.session_position && text == o.text && stop == o.stop;
  }
};

void check_logits(rlm_session* a, rlm_session* b) {
  const float *la = nullptr, *lb = nullptr;
  size_t na = 0, nb = 0;
  const rlm_status sa = rlm_session_logits(a, &la, &na);
  const rlm_status sb = rlm_session_logits(b, &lb, &nb);
  FUZZ_CHECK(sa == sb, "logits status %d vs %d", sa, sb);
  if (sa != RLM_OK) return;
  FUZZ_CHECK(na == nb && memcmp(la, lb, na * sizeof(float)) == 0, "logits differ");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (!models[0]) build_models();
  Reader in(data, size);
  const Model& md = *models[in.u8() % 3];
  const Model& dm = *models[in.u8() % 3];
  const uint8_t mode_byte = in.u8();
  const uint32_t max_draft = in.range(1, 8);
  const uint32_t n_ctx = in.range(16, 64);
  const uint64_t seed = in.u8();
  const bool greedy = in.u8() % 2 == 0;

  rlm_session_config c;
  rlm_session_config_default(&c);
  c.n_ctx = n_ctx;
  c.n_sink = 2;
  c.n_batch = 4;
  c.max_pending = 64;
  c.penalty_window = 16;
  Session plain, spec, draft;
  FUZZ_CHECK(plain.init(&md.m, c), "plain init");
  c.max_draft = max_draft;
  FUZZ_CHECK(spec.init(&md.m, c), "spec init");
  FUZZ_CHECK(draft.init(&dm.m, c), "draft init");

  auto set_spec = [&](uint8_t how) {
    rlm_speculation sp;
    rlm_speculation_default(&sp);
    sp.mode = how % 3 == 0 ? RLM_SPEC_DRAFT_MODEL : how % 3 == 1 ? RLM_SPEC_LOOKUP : RLM_SPEC_OFF;
    sp.draft = draft.s;
    sp.n_max = 1 + (how / 3) % max_draft;
    sp.p_min = (how & 0x40) ? 0.3f : 0.0f;
    sp.ngram_min = 1 + (how >> 4) % 2;
    sp.ngram_max = sp.ngram_min + (how >> 6) % 3;
    FUZZ_CHECK(rlm_session_set_speculation(spec.s, &sp) == RLM_OK, "set_speculation: %s",
               rlm_session_error(spec.s));
  };
  set_spec(mode_byte);

  rlm_sampling sp;
  rlm_sampling_default(&sp);
  sp.seed = seed;
  sp.temperature = greedy ? 0.0f : 1.1f;
  sp.repeat_penalty = 1.2f;
  sp.penalty_last_n = 8;
  for (rlm_session* s : {plain.s, spec.s}) {
    FUZZ_CHECK(rlm_session_set_sampling(s, &sp) == RLM_OK, "sampling");
    rlm_session_set_ignore_eos(s, 1);
  }

  const int32_t vocab = static_cast<int32_t>(md.vocab);
  for (int op = 0; op < 64 && !in.empty(); ++op) {
    const uint8_t opcode = in.u8() % 12;
    const uint8_t arg = in.u8();
    Seen seen[2];
    rlm_session* ss[2] = {plain.s, spec.s};
    for (int k = 0; k < 2; ++k) {
      rlm_session* s = ss[k];
      Seen& w = seen[k];
      switch (opcode) {
        case 0: {  // feed text: a repeating pattern makes lookup matches
          std::string t;
          for (int i = 0; i < 1 + arg % 12; ++i) t += static_cast<char>('a' + (i * arg) % 5);
          w.st = rlm_session_feed_text(s, t.data(), t.size());
          break;
        }
        case 1: {  // feed tokens, some out of range
          int32_t t[3] = {arg % vocab, (arg * 7) % vocab, arg > 250 ? vocab + 1 : 3};
          w.st = rlm_session_feed_tokens(s, t, 1 + arg % 3);
          break;
        }
        case 2:
        case 3: {  // steps
          const int n = opcode == 2 ? 1 : 1 + arg % 20;
          for (int i = 0; i < n; ++i) {
            rlm_step_result r;
            rlm_step_result_default(&r);
            const rlm_status st = rlm_step(s, &r);
            w.st = st;
            if (st != RLM_OK) break;
            FUZZ_CHECK(r.token >= 0 && r.token < vocab, "token %d", r.token);
            w.token ^= r.token * (i + 1);
            w.position = r.position;
            w.text.append(r.text, r.text_len);
            w.stop = r.stop;
            if (r.stop != RLM_STOP_NONE) break;
          }
          break;
        }
        case 4:
          w.st = rlm_session_eval(s);
          break;
        case 5: {
          const uint32_t pos = rlm_session_position(s);
          w.st = rlm_session_rewind(s, pos > arg % 8 ? pos - arg % 8 : 0);
          break;
        }
        case 6:
          w.st = rlm_session_reset(s);
          break;
        case 7: {  // a stop token that greedy output is likely to hit
          w.st = rlm_session_add_stop_token(s, arg % vocab);
          break;
        }
        case 8: {
          const char t[2] = {static_cast<char>('a' + arg % 5), static_cast<char>('a' + arg / 50)};
          w.st = rlm_session_add_stop_string(s, t, 1 + arg % 2);
          break;
        }
        case 9:
          w.st = rlm_session_set_max_tokens(s, arg % 16);
          break;
        case 10:
          w.st = rlm_session_clear_stops(s);
          break;
        case 11: {
          rlm_sampling p = sp;
          p.seed = arg;
          p.temperature = arg % 3 == 0 ? 0.0f : 0.7f + (arg % 7) * 0.1f;
          p.top_k = arg % 5;
          w.st = rlm_session_set_sampling(s, &p);
          if (k == 1 && arg % 4 == 0) set_spec(arg);  // switch the drafter too
          break;
        }
      }
      w.session_position = rlm_session_position(s);
    }
    FUZZ_CHECK(seen[0] == seen[1],
               "op %d (opcode %u arg %u): status %d/%d token %d/%d position %u/%u session %u/%u "
               "stop %d/%d text %zu/%zu bytes",
               op, opcode, arg, seen[0].st, seen[1].st, seen[0].token, seen[1].token,
               seen[0].position, seen[1].position, seen[0].session_position,
               seen[1].session_position, seen[0].stop, seen[1].stop, seen[0].text.size(),
               seen[1].text.size());
    check_logits(plain.s, spec.s);
  }
  rlm_spec_stats st;
  rlm_spec_stats_default(&st);
  FUZZ_CHECK(rlm_session_spec_stats(spec.s, &st) == RLM_OK && st.accepted <= st.drafted,
             "stats");
  if (getenv("RINGLM_FUZZ_STATS")) {
    fprintf(stderr, "passes %llu drafted %llu accepted %llu\n",
            static_cast<unsigned long long>(st.verify_passes),
            static_cast<unsigned long long>(st.drafted),
            static_cast<unsigned long long>(st.accepted));
  }
  return 0;
}
