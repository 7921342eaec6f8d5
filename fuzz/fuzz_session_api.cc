// Random sequences of C-ABI calls with random arguments on small random-weight models.
//
// The input picks a model (f32 tied / q8 untied / q4, 2 layers), a session config (valid or not)
// and then a program of calls: feed_text, feed_tokens, step, eval, rewind, reset, set_sampling,
// stop strings / tokens, max tokens, ignore-eos, logits, tokenize, token_to_bytes, score,
// set_logprobs, beam search, with random (often invalid) arguments. Properties:
//  - every call returns a named status; a failed call leaves position and logits as they were;
//  - a step's token is in range, its position is the session's, its text is valid UTF-8 and
//    holds no complete stop string;
//  - differential: the same program runs on a second session whose memory was pre-filled with a
//    different byte pattern; every result must be identical, so no output depends on memory
//    the runtime never wrote (an uninitialised read shows up as a difference).
// Input layout: [model][config: 11 bytes] then ops: [opcode][arguments...], the next opcode
// 1 + arguments[0] % 24 bytes after this one's arguments start.
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
  const ringlm::internal::fb::DType q[3] = {ringlm::internal::fb::DType::F32, ringlm::internal::fb::DType::Q8,
                                  ringlm::internal::fb::DType::Q4};
  for (int i = 0; i < 3; ++i) {
    ringlm_test::RandomModelShape shape;
    shape.dim = 32;
    shape.n_layers = 2;
    shape.n_heads = 4;
    shape.n_kv_heads = i == 1 ? 4 : 2;
    shape.ffn_dim = 40;
    shape.max_context = 64;
    shape.tied = i != 1;
    shape.seed = 77 + i;
    models[i] = new Model;
    std::string err;
    if (!ringlm_test::random_model(shape, q[i], &models[i]->bytes, &err) ||
        rlm_model_open(models[i]->bytes.data(), models[i]->bytes.size(), &models[i]->m) != RLM_OK) {
      fprintf(stderr, "fuzz_session_api: model build failed: %s\n", err.c_str());
      abort();
    }
    rlm_model_info info;
    rlm_model_info_default(&info);
    rlm_model_get_info(&models[i]->m, &info);
    models[i]->vocab = info.vocab_size;
  }
}

bool known_status(rlm_status s) {
  return (s >= RLM_OK && s <= RLM_ERR_UNSUPPORTED) || s == RLM_ERR_NO_CANDIDATES ||
         (s >= RLM_ERR_MODEL_TRUNCATED && s <= RLM_ERR_MODEL_UNSUPPORTED);
}

// One session plus what the program observed of it.
struct Run {
  Aligned mem;
  rlm_session* s = nullptr;
  std::string transcript;  // every result, serialised
  std::vector<std::string> stops;  // stop strings the session holds
  std::string turn_text;           // text released in the current turn
  bool logits_defined = false;     // a position has run since init / reset / rewind
  bool logprobs_on = false;        // rlm_session_set_logprobs enabled them
  uint32_t n_top = 0;              // alternatives asked for
  std::vector<rlm_token_logprob> top = std::vector<rlm_token_logprob>(8);  // the session's array

  void rec(const void* p, size_t n) { transcript.append(static_cast<const char*>(p), n); }
  void rec_status(rlm_status st) {
    FUZZ_CHECK(known_status(st), "unknown status %d", st);
    const int32_t v = st;
    rec(&v, 4);
  }
};

bool contains_stop(const std::string& text, const std::vector<std::string>& stops) {
  for (const std::string& st : stops) {
    if (!st.empty() && text.find(st) != std::string::npos) return true;
  }
  return false;
}

void snapshot_logits(const Run& r, uint32_t vocab, std::vector<float>* out) {
  out->clear();
  if (!r.logits_defined) return;
  const float* l = nullptr;
  size_t n = 0;
  FUZZ_CHECK(rlm_session_logits(r.s, &l, &n) == RLM_OK && n == vocab, "logits");
  out->assign(l, l + n);
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || memcmp(a.data(), b.data(), a.size() * 4) == 0);
}

// Executes one operation (decoded from `op`, a copy of the reader for each run so both runs see
// the same arguments) on `r`.
void execute(Run& r, const Model& md, uint32_t opcode, Reader in) {
  rlm_session* s = r.s;
  const uint32_t vocab = md.vocab;
  const uint32_t pos_before = rlm_session_position(s);
  std::vector<float> logits_before;
  snapshot_logits(r, vocab, &logits_before);
  rlm_status st = RLM_OK;
  bool check_unchanged = false;  // a failure must leave position and logits as they were
  switch (opcode) {
    case 0: {  // feed_text
      const uint8_t mode = in.u8();
      std::string text = in.bytes(48);
      if (mode % 16 == 0) st = rlm_session_feed_text(s, nullptr, text.size());
      else if (mode % 16 == 1) st = rlm_session_feed_text(s, nullptr, 0);
      else st = rlm_session_feed_text(s, text.data(), text.size());
      check_unchanged = true;
      if (st == RLM_OK) r.turn_text.clear();
      break;
    }
    case 1: {  // feed_tokens
      const uint8_t mode = in.u8();
      const uint32_t n = in.range(0, 24);
      std::vector<int32_t> t(n);
      for (uint32_t i = 0; i < n; ++i) {
        const uint8_t kind = in.u8();
        if (kind < 240) t[i] = static_cast<int32_t>(in.u16() % vocab);
        else if (kind < 248) t[i] = static_cast<int32_t>(vocab + (kind & 3));
        else if (kind < 252) t[i] = -1 - (kind & 3);
        else t[i] = INT32_MIN + (kind & 3);
      }
      if (mode % 16 == 0) st = rlm_session_feed_tokens(s, nullptr, n);
      else st = rlm_session_feed_tokens(s, n ? t.data() : nullptr, n);
      check_unchanged = true;
      if (st == RLM_OK) r.turn_text.clear();
      break;
    }
    case 2:
    case 3: {  // step, once or up to 24 times
      const uint32_t times = opcode == 2 ? 1 : in.range(1, 24);
      const uint8_t mode = in.u8();
      for (uint32_t k = 0; k < times; ++k) {
        rlm_step_result res;
        rlm_step_result_default(&res);
        const uint32_t before = rlm_session_position(s);
        std::vector<float> lb;
        snapshot_logits(r, vocab, &lb);
        if (mode % 32 == 0) {
          st = rlm_step(s, nullptr);
          FUZZ_CHECK(st == RLM_ERR_INVALID_ARGUMENT, "step(NULL result)");
        } else if (mode % 32 == 1) {
          res.struct_size = sizeof res + 8;
          st = rlm_step(s, &res);
          FUZZ_CHECK(st == RLM_ERR_STRUCT_SIZE, "step(bad struct_size)");
        } else {
          st = rlm_step(s, &res);
        }
        r.rec_status(st);
        if (st == RLM_ERR_NO_CANDIDATES) {
          // Everything banned (or NaN): the input ran as by rlm_session_eval, logits raw.
          r.logits_defined = true;
          break;
        }
        if (st != RLM_OK) {
          std::vector<float> la;
          snapshot_logits(r, vocab, &la);
          FUZZ_CHECK(rlm_session_position(s) == before, "failed step moved the position");
          FUZZ_CHECK(same_bits(lb, la), "failed step changed the logits");
          break;
        }
        r.logits_defined = true;
        FUZZ_CHECK(res.token >= 0 && static_cast<uint32_t>(res.token) < vocab, "token %d", res.token);
        FUZZ_CHECK(res.position == rlm_session_position(s), "step position %u vs session %u",
                   res.position, rlm_session_position(s));
        // After a rewind (nothing pending) the step runs the last kept position again: one token
        // evaluated, no position added.
        FUZZ_CHECK(res.position == before + res.n_evaluated ||
                       (res.n_evaluated == 1 && res.position == before),
                   "position %u != %u + %u", res.position, before, res.n_evaluated);
        FUZZ_CHECK(res.stop >= RLM_STOP_NONE && res.stop <= RLM_STOP_MAX_TOKENS, "stop");
        FUZZ_CHECK(res.text_len == 0 || res.text != nullptr, "text null");
        const std::string text(res.text_len ? res.text : "", res.text_len);
        FUZZ_CHECK(valid_utf8(text.data(), text.size()), "step text is not valid UTF-8");
        r.turn_text += text;
        FUZZ_CHECK(!contains_stop(r.turn_text, r.stops),
                   "released text of the turn contains a stop string (stop reason %d)", res.stop);
        r.rec(&res.token, 4);
        r.rec(&res.position, 4);
        r.rec(&res.stop, sizeof res.stop);
        r.rec(&res.n_evaluated, 4);
        r.rec(text.data(), text.size());
        // Log-probabilities (NaN while off): recorded for the differential check; on, they are
        // log-probabilities and the alternatives come sorted.
        r.rec(&res.logprob, 4);
        r.rec(&res.sampler_logprob, 4);
        r.rec(&res.n_top, 4);
        FUZZ_CHECK(res.n_top <= r.n_top, "n_top %u above the %u asked for", res.n_top, r.n_top);
        if (r.logprobs_on) {
          FUZZ_CHECK(!(res.logprob > 1e-5f), "logprob %g > 0", res.logprob);
          for (uint32_t t = 1; t < res.n_top; ++t) {
            FUZZ_CHECK(!(r.top[t].logprob > r.top[t - 1].logprob), "top-n not sorted");
          }
          r.rec(r.top.data(), res.n_top * sizeof(rlm_token_logprob));
        }
        if (res.stop != RLM_STOP_NONE) {
          // The turn ended: stepping again without input is a state error.
          rlm_step_result again;
          rlm_step_result_default(&again);
          FUZZ_CHECK(rlm_step(s, &again) == RLM_ERR_BAD_STATE, "step after a stop");
          FUZZ_CHECK(rlm_session_position(s) == res.position, "step after stop moved");
          r.turn_text.clear();
          break;
        }
      }
      return;
    }
    case 4: {  // eval
      st = rlm_session_eval(s);
      check_unchanged = true;
      if (st == RLM_OK && rlm_session_position(s) != pos_before) r.logits_defined = true;
      break;
    }
    case 5: {  // rewind
      const uint8_t mode = in.u8();
      uint32_t target;
      if (mode < 128) target = pos_before >= (mode & 15) ? pos_before - (mode & 15) : 0;
      else if (mode < 200) target = pos_before + 1 + (mode & 7);
      else if (mode < 250) target = 0;
      else target = UINT32_MAX;
      st = rlm_session_rewind(s, target);
      check_unchanged = true;
      if (st == RLM_OK) {
        FUZZ_CHECK(rlm_session_position(s) == target, "rewind position");
        r.turn_text.clear();
        r.logits_defined = false;
      } else {
        FUZZ_CHECK(st == RLM_ERR_INVALID_ARGUMENT || st == RLM_ERR_REWIND, "rewind: %s",
                   rlm_status_string(st));
        if (target > pos_before) FUZZ_CHECK(st == RLM_ERR_INVALID_ARGUMENT, "rewind beyond");
      }
      break;
    }
    case 6: {  // reset
      st = rlm_session_reset(s);
      FUZZ_CHECK(st == RLM_OK && rlm_session_position(s) == 0, "reset");
      r.turn_text.clear();
      r.logits_defined = false;
      break;
    }
    case 7: {  // set_sampling
      rlm_sampling sp;
      rlm_sampling_default(&sp);
      const uint8_t mode = in.u8();
      auto pick = [&in](float normal) {
        const uint8_t k = in.u8();
        switch (k % 12) {
          case 0: return NAN;
          case 1: return INFINITY;
          case 2: return -INFINITY;
          case 3: return -1.0f;
          case 4: return 0.0f;
          case 5: return 1e-30f;
          case 6: return in.f32();
          default: return normal * (static_cast<float>(k) / 128.0f);
        }
      };
      if (mode & 1) sp.temperature = pick(0.8f);
      if (mode & 2) sp.top_k = static_cast<int32_t>(in.u16()) - 16;
      if (mode & 4) sp.top_p = pick(0.9f);
      if (mode & 8) sp.min_p = pick(0.05f);
      if (mode & 16) {
        sp.repeat_penalty = pick(1.1f);
        sp.frequency_penalty = pick(0.5f);
        sp.presence_penalty = pick(0.5f);
        sp.penalty_last_n = static_cast<int32_t>(in.range(0, 300)) - 8;
      }
      sp.seed = in.u64();
      rlm_logit_bias bias[6];
      if (mode & 32) {
        sp.n_logit_bias = in.range(0, 6);
        for (uint32_t i = 0; i < sp.n_logit_bias; ++i) {
          const uint8_t k = in.u8();
          bias[i].token = k < 240 ? static_cast<int32_t>(in.u16() % vocab)
                                  : (k < 248 ? static_cast<int32_t>(vocab) : -1);
          bias[i].bias = pick(5.0f);
        }
        sp.logit_bias = (mode & 64) && sp.n_logit_bias ? nullptr : bias;
      }
      if ((mode & 0xC0) == 0xC0) sp.struct_size += 4;
      st = rlm_session_set_sampling(s, (mode == 0xFF) ? nullptr : &sp);
      check_unchanged = true;
      break;
    }
    case 8: {  // add_stop_string
      const uint8_t mode = in.u8();
      std::string text = in.bytes(12);
      st = mode % 16 == 0 ? rlm_session_add_stop_string(s, nullptr, text.size())
                          : rlm_session_add_stop_string(s, text.data(), text.size());
      if (st == RLM_OK) {
        FUZZ_CHECK(!text.empty() && valid_utf8(text.data(), text.size()), "accepted stop");
        r.stops.push_back(text);
        r.turn_text.clear();  // text released before the stop existed may contain it
      } else {
        FUZZ_CHECK(st == RLM_ERR_INVALID_ARGUMENT || st == RLM_ERR_INVALID_UTF8 ||
                       st == RLM_ERR_CAPACITY,
                   "add_stop_string: %s", rlm_status_string(st));
      }
      break;
    }
    case 9: {  // add_stop_token
      const uint8_t k = in.u8();
      const int32_t tok = k < 200 ? static_cast<int32_t>(in.u16() % vocab)
                                  : (k < 230 ? static_cast<int32_t>(vocab) : -1);
      st = rlm_session_add_stop_token(s, tok);
      if (tok < 0 || static_cast<uint32_t>(tok) >= vocab) {
        FUZZ_CHECK(st == RLM_ERR_TOKEN_OUT_OF_RANGE, "stop token out of range accepted");
      }
      break;
    }
    case 10:
      st = rlm_session_clear_stops(s);
      r.stops.clear();
      break;
    case 11:
      st = rlm_session_set_max_tokens(s, in.range(0, 12));
      break;
    case 12:
      st = rlm_session_set_ignore_eos(s, in.u8() & 1);
      break;
    case 13: {  // logits
      const float* l = nullptr;
      size_t n = 0;
      st = rlm_session_logits(s, &l, &n);
      if (r.logits_defined) {
        FUZZ_CHECK(st == RLM_OK && l != nullptr && n == vocab, "logits");
        r.rec(l, n * sizeof(float));
      } else {
        FUZZ_CHECK(st == RLM_ERR_BAD_STATE, "logits before a position ran: %s",
                   rlm_status_string(st));
      }
      FUZZ_CHECK(rlm_session_logits(s, nullptr, &n) == RLM_ERR_INVALID_ARGUMENT, "logits(NULL)");
      FUZZ_CHECK(rlm_session_logits(s, &l, nullptr) == RLM_ERR_INVALID_ARGUMENT, "logits(NULL)");
      break;
    }
    case 14: {  // tokenize (model-level), random capacity and scratch
      std::string text = in.bytes(40);
      const size_t cap = in.range(0, 48);
      const size_t need = rlm_tokenize_scratch_bytes(&md.m, text.size());
      const uint8_t sm = in.u8();
      size_t scratch_size = sm < 200 ? need : (sm < 230 ? (need ? need - 1 : 0) : 0);
      std::vector<uint64_t> scratch(scratch_size / 8 + 1);
      std::vector<int32_t> toks(cap + 1);
      size_t n_out = 12345;
      st = rlm_tokenize(&md.m, text.data(), text.size(), in.u8() & 1, toks.data(), cap, &n_out,
                        scratch_size ? scratch.data() : nullptr, scratch_size);
      if (st == RLM_OK) {
        FUZZ_CHECK(n_out <= cap, "tokenize n_out %zu > cap %zu", n_out, cap);
        for (size_t i = 0; i < n_out; ++i) FUZZ_CHECK(toks[i] >= 0 && static_cast<uint32_t>(toks[i]) < vocab, "id");
        r.rec(toks.data(), n_out * 4);
      } else {
        FUZZ_CHECK(st == RLM_ERR_CAPACITY || st == RLM_ERR_BUFFER_TOO_SMALL, "tokenize: %s",
                   rlm_status_string(st));
        if (st == RLM_ERR_CAPACITY) FUZZ_CHECK(n_out == 0 || n_out > cap, "capacity n_out");
        if (scratch_size >= need) FUZZ_CHECK(st != RLM_ERR_BUFFER_TOO_SMALL, "scratch of %zu", need);
      }
      break;
    }
    case 15: {  // token_to_bytes with a random capacity
      const int32_t tok = static_cast<int32_t>(in.u16() % (vocab + 2)) - 1;
      const size_t cap = in.range(0, 8);
      char buf[8];
      size_t n = 999;
      st = rlm_token_to_bytes(&md.m, tok, cap ? buf : nullptr, cap, &n);
      if (tok < 0 || static_cast<uint32_t>(tok) >= vocab) {
        FUZZ_CHECK(st == RLM_ERR_TOKEN_OUT_OF_RANGE, "token_to_bytes range");
      } else {
        FUZZ_CHECK(st == (n <= cap ? RLM_OK : RLM_ERR_CAPACITY), "token_to_bytes capacity");
      }
      break;
    }
    case 16: {  // score up to 12 tokens (some out of range), outputs optional
      const uint8_t mode = in.u8();
      const uint32_t n = in.range(0, 12);
      std::vector<int32_t> t(n);
      for (uint32_t i = 0; i < n; ++i) {
        const uint8_t kind = in.u8();
        t[i] = kind < 250 ? static_cast<int32_t>(in.u16() % vocab)
                          : kind < 253 ? static_cast<int32_t>(vocab) : -1;
      }
      std::vector<float> lp(n, 7.0f), lg(static_cast<size_t>(n) * vocab, 7.0f);
      double sum = 7.0;
      st = rlm_session_score(s, n ? t.data() : nullptr, n, (mode & 1) ? lp.data() : nullptr,
                             (mode & 2) ? lg.data() : nullptr, (mode & 4) ? &sum : nullptr);
      if (st == RLM_OK) {
        double total = 0;
        for (uint32_t i = 0; i < n && (mode & 1); ++i) {
          FUZZ_CHECK(!(lp[i] > 1e-5f), "score logprob %g > 0", lp[i]);
          total += lp[i];
        }
        if ((mode & 5) == 5) FUZZ_CHECK(fabs(total - sum) <= 1e-3 * (1 + fabs(sum)), "score sum");
        r.rec(lp.data(), lp.size() * 4);
        r.rec(&sum, 8);
        if (mode & 2) r.rec(lg.data(), lg.size() * 4);
        r.turn_text.clear();
      } else {
        check_unchanged = true;  // every refusal comes before anything runs
      }
      if (st == RLM_OK && n > 0) r.logits_defined = true;
      break;
    }
    case 17: {  // set_logprobs: on/off, 0..8 alternatives, sometimes a null array or too many
      const uint8_t mode = in.u8();
      const uint32_t n_top = in.range(0, 8);
      const bool enable = mode & 1;
      if (mode % 16 == 2) {
        st = rlm_session_set_logprobs(s, 1, nullptr, n_top + 1);
        FUZZ_CHECK(st == RLM_ERR_INVALID_ARGUMENT, "set_logprobs(null array)");
      } else if (mode % 16 == 4) {
        st = rlm_session_set_logprobs(s, 1, r.top.data(), 5000);
        FUZZ_CHECK(st == RLM_ERR_INVALID_ARGUMENT, "set_logprobs(5000)");
      } else {
        st = rlm_session_set_logprobs(s, enable, r.top.data(), n_top);
        FUZZ_CHECK(st == RLM_OK, "set_logprobs");
        r.logprobs_on = enable;
        r.n_top = enable ? n_top : 0;
      }
      break;
    }
    case 18: {  // beam search with random (often invalid) parameters and result buffers
      rlm_beam_params p;
      rlm_beam_params_default(&p);
      p.n_beams = in.range(0, 4);
      p.max_tokens = in.range(0, 12);
      p.n_best = in.range(0, 3);
      const uint8_t a = in.u8();
      p.length_penalty = a % 8 == 0 ? NAN : static_cast<float>(a % 5) * 0.5f - 0.5f;
      rlm_beam_result res[3];
      int32_t bufs[3][12];
      for (int i = 0; i < 3; ++i) {
        rlm_beam_result_default(&res[i]);
        res[i].capacity = in.range(0, 12);
        res[i].tokens = res[i].capacity ? bufs[i] : nullptr;
      }
      uint32_t n = 99;
      st = rlm_session_beam_search(s, &p, res, &n);
      FUZZ_CHECK(st == RLM_OK || n <= p.n_best, "n_out %u", n);
      if (st == RLM_OK) {
        const uint32_t max_tokens = p.max_tokens;
        FUZZ_CHECK(n >= 1 && n <= p.n_best, "beam results %u of %u", n, p.n_best);
        for (uint32_t i = 0; i < n; ++i) {
          FUZZ_CHECK(res[i].n_tokens >= 1 && res[i].n_tokens <= res[i].capacity &&
                         (max_tokens == 0 || res[i].n_tokens <= max_tokens),
                     "beam result length %u", res[i].n_tokens);
          for (uint32_t k = 0; k < res[i].n_tokens; ++k) {
            FUZZ_CHECK(res[i].tokens[k] >= 0 && static_cast<uint32_t>(res[i].tokens[k]) < vocab,
                       "beam token");
          }
          FUZZ_CHECK(res[i].stop >= RLM_STOP_END_TOKEN && res[i].stop <= RLM_STOP_MAX_TOKENS,
                     "beam stop %d", res[i].stop);
          FUZZ_CHECK(!(res[i].logprob > 1e-4), "beam logprob %g", res[i].logprob);
          FUZZ_CHECK(i == 0 || !(res[i].score > res[i - 1].score), "beam results not sorted");
          r.rec(res[i].tokens, res[i].n_tokens * 4);
          r.rec(&res[i].logprob, 8);
          r.rec(&res[i].stop, sizeof res[i].stop);
        }
      }
      r.rec(&n, 4);
      // A search (and a failure after it ran) leaves no logits.
      const float* l = nullptr;
      size_t nl = 0;
      r.logits_defined = rlm_session_logits(s, &l, &nl) == RLM_OK;
      break;
    }
    default:
      return;
  }
  r.rec_status(st);
  const uint32_t pos_after = rlm_session_position(s);
  r.rec(&pos_after, 4);
  if (check_unchanged && st != RLM_OK) {
    std::vector<float> la;
    snapshot_logits(r, vocab, &la);
    FUZZ_CHECK(pos_after == pos_before, "failed call (op %u, %s) moved the position %u -> %u",
               opcode, rlm_status_string(st), pos_before, pos_after);
    FUZZ_CHECK(same_bits(logits_before, la), "failed call (op %u) changed the logits", opcode);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  build_models();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (!models[0]) build_models();
  Reader in(data, size);
  const Model& md = *models[in.u8() % 3];

  rlm_session_config cfg;
  rlm_session_config_default(&cfg);
  const uint8_t cmode = in.u8();
  cfg.n_ctx = in.range(2, 40);
  cfg.n_sink = in.range(0, 8) % cfg.n_ctx;
  cfg.kv_dtype = (cmode & 1) ? RLM_KV_F16 : (cmode & 0x20) ? RLM_KV_Q8 : RLM_KV_F32;
  cfg.n_threads = (cmode & 0x0E) == 0x0E ? 2 : 1;
  cfg.n_batch = in.range(1, 8);
  cfg.max_pending = in.range(1, 40);
  cfg.max_text_bytes = in.range(0, 64);
  cfg.stop_string_bytes = in.range(0, 24);
  cfg.max_stop_strings = in.range(0, 4);
  cfg.max_stop_tokens = in.range(0, 3);
  cfg.penalty_window = in.range(0, 40);
  cfg.max_logit_bias = in.range(0, 5);
  cfg.kernels = (cmode & 0x10) ? "ref" : nullptr;
  // Scoring rows and beams from bytes read above (the input layout stays 11 config bytes).
  cfg.max_logit_rows = cfg.max_pending % 5;
  cfg.max_beams = cfg.max_stop_tokens;
  cfg.max_beam_tokens = cfg.penalty_window % 13;
  if ((cmode & 0xE0) == 0xE0) {
    // Hostile config: any values; init must refuse it cleanly or work.
    cfg.n_ctx = in.u32();
    cfg.n_sink = in.u32();
    cfg.n_batch = in.u32();
    cfg.max_pending = in.u32();
    cfg.penalty_window = in.u32();
    cfg.n_threads = in.u8() % 3;
    int raw_kv = static_cast<int>(in.u8()) - 1;
    memcpy(&cfg.kv_dtype, &raw_kv, sizeof raw_kv);
  }
  size_t need = 0, align = 0;
  const rlm_status ms = rlm_session_memory(&md.m, &cfg, &need, &align);
  if (ms != RLM_OK) {
    FUZZ_CHECK(ms == RLM_ERR_INVALID_ARGUMENT, "session_memory: %s", rlm_status_string(ms));
    Aligned tiny;
    tiny.resize_fill(64, 0);
    rlm_session* s = reinterpret_cast<rlm_session*>(0x1);
    FUZZ_CHECK(rlm_session_init(&md.m, &cfg, tiny.data(), 64, &s) == ms && s == nullptr,
               "init disagrees with session_memory");
    return 0;
  }
  if (need > (2u << 20)) return 0;  // keep executions fast

  Run runs[2];
  const uint8_t fills[2] = {0x00, 0xFF};
  for (int k = 0; k < 2; ++k) {
    runs[k].mem.resize_fill(need, fills[k]);
    // One byte short never leaves a session behind.
    rlm_session* s = reinterpret_cast<rlm_session*>(0x1);
    FUZZ_CHECK(rlm_session_init(&md.m, &cfg, runs[k].mem.data(), need - 1, &s) ==
                       RLM_ERR_BUFFER_TOO_SMALL && s == nullptr,
               "init(size - 1)");
    const rlm_status is = rlm_session_init(&md.m, &cfg, runs[k].mem.data(), need, &runs[k].s);
    FUZZ_CHECK(is == RLM_OK, "init: %s", rlm_status_string(is));
  }
  // The program, run on both sessions op by op.
  for (int op = 0; op < 64 && !in.empty(); ++op) {
    const uint32_t opcode = in.u8() % 19;
    // Arguments: the next 96 bytes (at most), consumed identically by both runs.
    const size_t take = in.remaining() < 96 ? in.remaining() : 96;
    const std::string arg_bytes = [&] {
      Reader copy = in;
      return copy.rest().substr(0, take);
    }();
    Reader args(reinterpret_cast<const uint8_t*>(arg_bytes.data()), arg_bytes.size());
    for (int k = 0; k < 2; ++k) execute(runs[k], md, opcode, args);  // each gets a copy of args
    FUZZ_CHECK(runs[0].transcript == runs[1].transcript,
               "results depend on the initial contents of session memory (op %d, opcode %u)", op,
               opcode);
    // The next opcode follows 1 + args[0] % 24 bytes on (ops read their arguments from a copy,
    // so the stride does not depend on what they consumed; fuzz/make_seeds.cc writes programs
    // in this layout).
    const size_t stride = 1 + (arg_bytes.empty() ? 0 : static_cast<uint8_t>(arg_bytes[0]) % 24);
    for (size_t i = 0; i < stride && !in.empty(); ++i) in.u8();
  }
  for (int k = 0; k < 2; ++k) {
    FUZZ_CHECK(rlm_session_release(runs[k].s) == RLM_OK, "release");
    FUZZ_CHECK(rlm_session_release(runs[k].s) == RLM_OK, "double release");
    rlm_step_result res;
    rlm_step_result_default(&res);
    FUZZ_CHECK(rlm_step(runs[k].s, &res) == RLM_ERR_BAD_STATE, "step on a released session");
  }
  return 0;
}
