#include "snapshot.h"

#include <stddef.h>
#include <string.h>

namespace ringlm::internal {
namespace {

constexpr char kMagic[8] = {'R', 'L', 'M', 'S', 'N', 'A', 'P', '1'};
constexpr uint32_t kVersion = 1;

enum Flags : uint32_t {
  kHasLast = 1u << 0,
  kLogitsReady = 1u << 1,
  kLogitsValid = 1u << 2,
  kTurnEnded = 1u << 3,
  kIgnoreEos = 1u << 4,
};

// Fixed-size, pointer-free. Everything after `checksum` is covered by it.
struct Header {
  char magic[8];
  uint32_t version;
  uint32_t header_bytes;
  uint64_t total_bytes;
  uint64_t checksum;
  uint64_t model_fp;
  uint32_t vocab, n_layers, kv_dim, kv_dtype;
  uint32_t ring_ctx[2], ring_sink[2];  // [kKvGlobal], [kKvLocal] of the saving session
  uint32_t n_past, n_pending;
  int32_t prev_token;
  uint32_t generated, max_tokens, flags;
  uint32_t n_history, n_bias, n_stop_tokens;
  uint32_t stop_count, stop_used, stop_max_len;
  uint32_t stream_len, stream_released;
  uint8_t dec_seq[4];
  uint8_t dec_have, dec_need, pad[2];
  uint32_t sampler_bytes;              // sizeof(SamplerParams) of the build that saved
  uint64_t rng_state;
  float mirostat_mu;                   // Mirostat v2's state
  uint32_t reserved;
};

// 64-bit FNV-1a over 8-byte words (then the tail bytes): every step is a bijection of the state,
// so any change confined to one word always changes the result.
uint64_t checksum(const uint8_t* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
  }
  for (; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

constexpr size_t kChecked = offsetof(Header, model_fp);

// Live positions of a ring kind (slots ctx, sinks sink) at n_past, ascending: every position
// while the ring has not wrapped, else the sinks and the last ctx - sink positions.
struct Live {
  uint64_t n_past;
  uint32_t ctx, sink;
  uint32_t count() const { return n_past <= ctx ? static_cast<uint32_t>(n_past) : ctx; }
  uint64_t at(uint32_t i) const {
    if (n_past <= ctx || i < sink) return i;
    return n_past - (ctx - sink) + (i - sink);
  }
};

enum class Mode { kMeasure, kSave, kRestore, kCopy };

// Moves the body between the session and the stream; sizes come from `h` only. kCopy copies
// each field to the same place in another session of the same model and config: every buffer
// is carved from the session block by the same layout, so it sits `delta` bytes further on.
struct Io {
  Mode mode;
  uint8_t* out;
  const uint8_t* in;
  size_t n;
  ptrdiff_t delta;
  void raw(void* p, size_t len) {
    if (len == 0) return;
    if (mode == Mode::kSave) memcpy(out + n, p, len);
    else if (mode == Mode::kRestore) memcpy(p, in + n, len);
    else if (mode == Mode::kCopy) memcpy(static_cast<uint8_t*>(p) + delta, p, len);
    n += len;
  }
  // Slot `slot` of the `plane` sequence at `base` (kv_ring.h), as its encoded row: the snapshot
  // holds rows whatever the cache's layout.
  void slot(const KvRing& kv, KvPlane plane, void* base, uint32_t slot) {
    if (mode == Mode::kSave) {
      kv_slot_get(plane, kv.dtype, kv.kv_dim, kv.head_dim, base, slot, out + n);
    } else if (mode == Mode::kRestore) {
      kv_slot_put(plane, kv.dtype, kv.kv_dim, kv.head_dim, base, slot, in + n);
    } else if (mode == Mode::kCopy) {
      kv_slot_move(plane, kv.dtype, kv.kv_dim, kv.head_dim, base, slot, delta);
    }
    n += kv.row_bytes;
  }
};

const char* kv_dtype_name(uint32_t dtype) {
  return dtype == RLM_KV_F32 ? "f32" : dtype == RLM_KV_F16 ? "f16" : dtype == RLM_KV_Q8 ? "q8" : "unknown";
}

// The body, in order. In kSave / kMeasure `s` is read; in kRestore it is written (after
// everything was checked).
void body(SessionImpl* s, const Header& h, Io& io) {
  // Sampler parameters: raw, with the one pointer (the bias array) cleared.
  // Sampler parameters: raw, with the pointers (the bias array, DRY's breaker bitset) cleared;
  // restore points them at this session's own (the bitset built again from the breakers).
  SamplerParams sp = s->sp;
  sp.logit_bias = nullptr;
  sp.dry_breaker_bits = nullptr;
  if (io.mode == Mode::kCopy) {
    io.n += sizeof sp;  // a local: session_copy_state assigns it
  } else {
    io.raw(&sp, sizeof sp);
  }
  if (io.mode == Mode::kRestore) {
    sp.logit_bias = s->bias;
    sampler_build_dry_breakers(&sp, s->tok, s->model->hp.vocab_size, s->piece,
                               s->model->hp.max_token_text, &s->ss);
    s->sp = sp;
  }
  io.raw(s->bias, h.n_bias * sizeof(rlm_logit_bias));
  io.raw(s->batch, (1 + static_cast<size_t>(h.n_pending)) * sizeof(int32_t));
  io.raw(s->history, h.n_history * sizeof(int32_t));
  io.raw(s->stop_tokens, h.n_stop_tokens * sizeof(int32_t));
  io.raw(s->stops.offset, h.stop_count * sizeof(uint32_t));
  io.raw(s->stops.length, h.stop_count * sizeof(uint32_t));
  io.raw(s->stops.bytes, h.stop_used);
  io.raw(s->stream.buf, h.stream_len);
  if (h.flags & kLogitsValid) {
    // Saved from the row in use, restored (and copied) into row 0.
    const size_t bytes = static_cast<size_t>(h.vocab) * sizeof(float);
    if (io.mode == Mode::kCopy) {
      memcpy(reinterpret_cast<uint8_t*>(s->tf.logits) + io.delta, session_logits(s), bytes);
      io.n += bytes;
    } else {
      io.raw(io.mode == Mode::kRestore ? s->tf.logits : session_logits(s), bytes);
    }
  }
  // K and V rows of the live positions, layer by layer.
  KvRing& kv = s->tf.kv;
  for (uint32_t l = 0; l < h.n_layers; ++l) {
    const uint32_t kind = kv.layer_kind[l];
    const Live live{h.n_past, h.ring_ctx[kind], h.ring_sink[kind]};
    const KvGeom& g = kv.geom[kind];
    for (uint32_t i = 0; i < live.count(); ++i) {
      io.slot(kv, kKvKeys, kv_row(kv, kv.k, l, 0), kv_slot(g, live.at(i)));
    }
    for (uint32_t i = 0; i < live.count(); ++i) {
      io.slot(kv, kKvValues, kv_row(kv, kv.v, l, 0), kv_slot(g, live.at(i)));
    }
  }
  const Live glive{h.n_past, h.ring_ctx[kKvGlobal], h.ring_sink[kKvGlobal]};
  for (uint32_t i = 0; i < glive.count(); ++i) {
    io.raw(&kv.tokens[kv_slot(kv.geom[kKvGlobal], glive.at(i))], sizeof(int32_t));
  }
}

void fill_header(const SessionImpl* s, Header* h) {
  memset(h, 0, sizeof *h);
  memcpy(h->magic, kMagic, sizeof kMagic);
  h->version = kVersion;
  h->header_bytes = sizeof(Header);
  h->model_fp = model_fingerprint(*s->model);
  h->vocab = s->model->hp.vocab_size;
  h->n_layers = s->model->hp.n_layers;
  h->kv_dim = s->tf.kv.kv_dim;
  h->kv_dtype = static_cast<uint32_t>(s->tf.kv.dtype);
  for (int k = 0; k < 2; ++k) {
    h->ring_ctx[k] = s->tf.kv.geom[k].n_ctx;
    h->ring_sink[k] = s->tf.kv.geom[k].n_sink;
  }
  if (!s->model->hp.has_local_layers) h->ring_ctx[kKvLocal] = h->ring_sink[kKvLocal] = 0;
  h->n_past = s->n_past;
  h->n_pending = s->n_pending;
  h->prev_token = s->prev_token;
  h->generated = s->generated;
  h->max_tokens = s->max_tokens;
  h->flags = (s->has_last ? kHasLast : 0u) | (s->logits_ready ? kLogitsReady : 0u) |
             (s->logits_valid ? kLogitsValid : 0u) | (s->turn_ended ? kTurnEnded : 0u) |
             (s->ignore_eos ? kIgnoreEos : 0u);
  h->n_history = s->n_history;
  h->n_bias = s->sp.n_logit_bias;
  h->n_stop_tokens = s->n_stop_tokens;
  h->stop_count = s->stops.count;
  h->stop_used = s->stops.used;
  h->stop_max_len = s->stops.max_len;
  h->stream_len = s->stream.len;
  h->stream_released = s->stream.released;
  memcpy(h->dec_seq, s->stream.dec.seq, 4);
  h->dec_have = s->stream.dec.have;
  h->dec_need = s->stream.dec.need;
  h->sampler_bytes = sizeof(SamplerParams);
  h->rng_state = s->rng.state;
  h->mirostat_mu = s->mirostat_mu;
}

size_t body_bytes(SessionImpl* s, const Header& h) {
  Io io{Mode::kMeasure, nullptr, nullptr, 0, 0};
  body(s, h, io);
  return io.n;
}

// The header's scalars into the session (restore and copy).
void apply_header(SessionImpl* s, const Header& h) {
  s->n_past = h.n_past;
  s->n_pending = h.n_pending;
  s->prev_token = h.prev_token;
  s->generated = h.generated;
  s->max_tokens = h.max_tokens;
  s->has_last = h.flags & kHasLast;
  s->logits_ready = h.flags & kLogitsReady;
  s->logits_valid = h.flags & kLogitsValid;
  s->logits_row = 0;
  s->turn_ended = h.flags & kTurnEnded;
  s->ignore_eos = h.flags & kIgnoreEos;
  s->n_history = h.n_history;
  s->n_stop_tokens = h.n_stop_tokens;
  s->stops.count = h.stop_count;
  s->stops.used = h.stop_used;
  s->stops.max_len = h.stop_max_len;
  s->stream.len = h.stream_len;
  s->stream.released = h.stream_released;
  memcpy(s->stream.dec.seq, h.dec_seq, 4);
  s->stream.dec.have = h.dec_have;
  s->stream.dec.need = h.dec_need;
  s->rng.state = h.rng_state;
  s->mirostat_mu = h.mirostat_mu;
  s->grammar = nullptr;
}

// The body's values a checksum cannot vouch for (a snapshot is untrusted input): every token id
// in range, the sampler parameters within the rules of rlm_session_set_sampling and this
// session's window, stop strings inside their bytes and well-formed, the held-back text
// well-formed UTF-8, the decoder state possible.
Status validate_body(const Header& h, const uint8_t* b, size_t body_len, const SessionConfig& c,
                     ErrorSink* err) {
  const int32_t vocab = static_cast<int32_t>(h.vocab);
  auto token_ok = [vocab](int32_t t) { return t >= 0 && t < vocab; };
  auto ints = [b](size_t off, uint32_t i) {
    int32_t v;
    memcpy(&v, b + off + 4 * static_cast<size_t>(i), 4);
    return v;
  };
  size_t o = 0;
  SamplerParams sp;
  memcpy(&sp, b, sizeof sp);
  o += sizeof sp;
  const bool sp_ok = sp.temperature >= 0.0f && sp.temperature <= 3.4e38f && sp.top_k >= 0 &&
                     sp.top_p > 0.0f && sp.top_p <= 1.0f && sp.min_p >= 0.0f && sp.min_p <= 1.0f &&
                     sp.repeat_penalty > 0.0f && sp.repeat_penalty <= 3.4e38f &&
                     sp.frequency_penalty == sp.frequency_penalty &&
                     sp.presence_penalty == sp.presence_penalty && sp.penalty_last_n >= 0 &&
                     static_cast<uint32_t>(sp.penalty_last_n) <= c.penalty_window &&
                     sp.n_logit_bias == h.n_bias &&
                     sampler_extra_params_valid(sp, c.penalty_window) &&
                     h.mirostat_mu == h.mirostat_mu && h.mirostat_mu <= 3.4e38f &&
                     h.mirostat_mu >= -3.4e38f;
  RLM_CHECK(sp_ok, RLM_ERR_SNAPSHOT_CORRUPT, err,
            "the snapshot's sampling parameters are out of range for this session");
  for (uint32_t i = 0; i < h.n_bias; ++i) {
    rlm_logit_bias e;
    memcpy(&e, b + o + i * sizeof e, sizeof e);
    RLM_CHECK(token_ok(e.token) && e.bias == e.bias, RLM_ERR_SNAPSHOT_CORRUPT, err,
              "the snapshot's logit bias %u is invalid", i);
  }
  o += h.n_bias * sizeof(rlm_logit_bias);
  RLM_CHECK(!(h.flags & kHasLast) || token_ok(ints(o, 0)), RLM_ERR_SNAPSHOT_CORRUPT, err,
            "the snapshot's last token is out of range");
  for (uint32_t i = 1; i <= h.n_pending; ++i) {
    RLM_CHECK(token_ok(ints(o, i)), RLM_ERR_SNAPSHOT_CORRUPT, err,
              "the snapshot's pending token %u is out of range", i - 1);
  }
  o += (1 + static_cast<size_t>(h.n_pending)) * 4;
  o += static_cast<size_t>(h.n_history) * 4;  // ids outside the vocabulary are ignored there
  o += static_cast<size_t>(h.n_stop_tokens) * 4;  // only compared
  const size_t off_at = o, len_at = o + 4 * static_cast<size_t>(h.stop_count);
  o = len_at + 4 * static_cast<size_t>(h.stop_count);
  uint32_t max_len = 0;
  for (uint32_t i = 0; i < h.stop_count; ++i) {
    const uint32_t so = static_cast<uint32_t>(ints(off_at, i)), sl = static_cast<uint32_t>(ints(len_at, i));
    RLM_CHECK(sl > 0 && so <= h.stop_used && sl <= h.stop_used - so &&
                  utf8_valid(reinterpret_cast<const char*>(b + o + so), sl),
              RLM_ERR_SNAPSHOT_CORRUPT, err, "the snapshot's stop string %u is invalid", i);
    if (sl > max_len) max_len = sl;
  }
  RLM_CHECK(max_len == h.stop_max_len, RLM_ERR_SNAPSHOT_CORRUPT, err,
            "the snapshot's stop strings disagree with its header");
  o += h.stop_used;
  RLM_CHECK(utf8_valid(reinterpret_cast<const char*>(b + o + h.stream_released),
                       h.stream_len - h.stream_released) &&
                (h.dec_have == 0 || (h.dec_need >= 2 && h.dec_need <= 4 && h.dec_have < h.dec_need)),
            RLM_ERR_SNAPSHOT_CORRUPT, err, "the snapshot's held-back text is not valid UTF-8");
  o += h.stream_len;
  // Logits and K/V rows may hold any values. The body ends with the tokens of the live global
  // positions (its size was checked against the header).
  const Live glive{h.n_past, h.ring_ctx[kKvGlobal], h.ring_sink[kKvGlobal]};
  const size_t tokens_at = body_len - 4 * static_cast<size_t>(glive.count());
  for (uint32_t i = 0; i < glive.count(); ++i) {
    RLM_CHECK(token_ok(ints(tokens_at, i)), RLM_ERR_SNAPSHOT_CORRUPT, err,
              "the snapshot's token at position %llu is out of range",
              static_cast<unsigned long long>(glive.at(i)));
  }
  RLM_CHECK(h.prev_token == -1 || token_ok(h.prev_token), RLM_ERR_SNAPSHOT_CORRUPT, err,
            "the snapshot's previous token is out of range");
  return RLM_OK;
}

}  // namespace

uint64_t model_fingerprint(const ModelImpl& m) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](uint64_t v) { h = (h ^ v) * 0x100000001b3ull; };
  const Hparams& hp = m.hp;
  for (uint32_t v : {hp.n_layers, hp.dim, hp.n_heads, hp.n_kv_heads, hp.head_dim, hp.ffn_dim,
                     hp.vocab_size, hp.max_context, hp.sliding_window}) {
    mix(v);
  }
  mix(m.size);
  mix(m.weight_bytes);
  mix(m.n_tensors);
  // 64 bytes at 64 offsets spread over the file: weights that differ show somewhere.
  for (uint32_t i = 0; i < 64; ++i) {
    const size_t at = m.size > 64 ? static_cast<size_t>((m.size - 64) * (i / 63.0)) : 0;
    const size_t n = m.size < 64 ? m.size : 64;
    mix(checksum(m.bytes + at, n));
  }
  return h;
}

size_t snapshot_bytes(const SessionImpl* s) {
  Header h;
  fill_header(s, &h);
  return sizeof(Header) + body_bytes(const_cast<SessionImpl*>(s), h);  // measure: reads nothing
}

Status snapshot_save(SessionImpl* s, void* out, size_t cap, size_t* n_out) {
  ErrorSink err{s->error, sizeof s->error};
  RLM_CHECK(s->grammar == nullptr, RLM_ERR_UNSUPPORTED, &err,
            "a session with a grammar set cannot be saved (a snapshot holds no grammar): set it "
            "to NULL first");
  session_end_pass(s);
  Header h;
  fill_header(s, &h);
  const size_t total = sizeof(Header) + body_bytes(s, h);
  *n_out = total;
  RLM_CHECK(cap >= total, RLM_ERR_CAPACITY, &err, "snapshot of %zu bytes, buffer of %zu", total,
            cap);
  uint8_t* o = static_cast<uint8_t*>(out);
  h.total_bytes = total;
  Io io{Mode::kSave, o + sizeof(Header), nullptr, 0, 0};
  body(s, h, io);
  memcpy(o, &h, sizeof h);
  const uint64_t sum = checksum(o + kChecked, total - kChecked);
  memcpy(o + offsetof(Header, checksum), &sum, sizeof sum);
  return RLM_OK;
}

Status snapshot_restore(SessionImpl* s, const void* in, size_t n) {
  ErrorSink err{s->error, sizeof s->error};
  const uint8_t* p = static_cast<const uint8_t*>(in);
  Header h;
  RLM_CHECK(n >= sizeof(Header), RLM_ERR_SNAPSHOT_CORRUPT, &err,
            "snapshot of %zu bytes: shorter than its header (%zu)", n, sizeof(Header));
  memcpy(&h, p, sizeof h);
  RLM_CHECK(memcmp(h.magic, kMagic, sizeof kMagic) == 0, RLM_ERR_SNAPSHOT_CORRUPT, &err,
            "not a ringlm session snapshot (magic)");
  RLM_CHECK(h.version == kVersion && h.header_bytes == sizeof(Header), RLM_ERR_SNAPSHOT_CORRUPT,
            &err, "snapshot version %u (header %u bytes); this library reads version %u", h.version,
            h.header_bytes, kVersion);
  RLM_CHECK(h.total_bytes == n, RLM_ERR_SNAPSHOT_CORRUPT, &err,
            "snapshot says %llu bytes, %zu given (truncated or padded)",
            static_cast<unsigned long long>(h.total_bytes), n);
  RLM_CHECK(checksum(p + kChecked, n - kChecked) == h.checksum, RLM_ERR_SNAPSHOT_CORRUPT, &err,
            "snapshot checksum mismatch: the bytes were changed");
  // Compatibility with this session.
  const ModelImpl& m = *s->model;
  const KvRing& kv = s->tf.kv;
  RLM_CHECK(h.model_fp == model_fingerprint(m) && h.vocab == m.hp.vocab_size &&
                h.n_layers == m.hp.n_layers && h.kv_dim == kv.kv_dim,
            RLM_ERR_SNAPSHOT_MISMATCH, &err, "the snapshot was taken with another model");
  RLM_CHECK(h.kv_dtype == static_cast<uint32_t>(kv.dtype), RLM_ERR_SNAPSHOT_MISMATCH, &err,
            "the snapshot's KV cache is %s, this session's %s", kv_dtype_name(h.kv_dtype),
            kv_dtype_name(kv.dtype));
  RLM_CHECK(h.sampler_bytes == sizeof(SamplerParams), RLM_ERR_SNAPSHOT_MISMATCH, &err,
            "the snapshot was saved by another build of the library (sampler state of %u bytes, "
            "this build's %zu)",
            h.sampler_bytes, sizeof(SamplerParams));
  for (int k = 0; k < (m.hp.has_local_layers ? 2 : 1); ++k) {
    const KvGeom& g = kv.geom[k];
    const char* what = k == kKvGlobal ? "ring" : "sliding-window ring";
    if (h.n_past > h.ring_ctx[k]) {
      RLM_CHECK(g.n_ctx == h.ring_ctx[k] && g.n_sink == h.ring_sink[k], RLM_ERR_SNAPSHOT_MISMATCH,
                &err,
                "the snapshot's %s had wrapped (%u positions in %u slots, %u sinks): this "
                "session needs the same slots and sinks, it has %u and %u",
                what, h.n_past, h.ring_ctx[k], h.ring_sink[k], g.n_ctx, g.n_sink);
    } else {
      RLM_CHECK(g.n_ctx >= h.n_past, RLM_ERR_SNAPSHOT_MISMATCH, &err,
                "the snapshot holds %u positions; this session's %s has %u slots", h.n_past, what,
                g.n_ctx);
    }
  }
  const SessionConfig& c = s->cfg;
  RLM_CHECK(h.n_pending <= c.max_pending && h.n_history <= c.penalty_window &&
                h.n_bias <= c.max_logit_bias && h.n_stop_tokens <= c.max_stop_tokens &&
                h.stop_count <= c.max_stop_strings && h.stop_used <= c.stop_string_bytes &&
                h.stream_len <= s->stream.cap && h.stream_released <= h.stream_len &&
                h.dec_have <= 4 && h.dec_need <= 4,
            RLM_ERR_CAPACITY, &err,
            "the snapshot needs budgets this session lacks (pending %u / %u, penalty window %u / "
            "%u, logit bias %u / %u, stop tokens %u / %u, stop strings %u / %u of %u / %u bytes)",
            h.n_pending, c.max_pending, h.n_history, c.penalty_window, h.n_bias, c.max_logit_bias,
            h.n_stop_tokens, c.max_stop_tokens, h.stop_count, c.max_stop_strings, h.stop_used,
            c.stop_string_bytes);
  RLM_CHECK(sizeof(Header) + body_bytes(s, h) == n, RLM_ERR_SNAPSHOT_CORRUPT, &err,
            "snapshot body size does not match its header");
  RLM_RETURN_IF_ERROR(validate_body(h, p + sizeof(Header), n - sizeof(Header), c, &err));

  // Everything checked: nothing below can fail.
  session_end_pass(s);
  session_forget_draft(s);
  Io io{Mode::kRestore, nullptr, p + sizeof(Header), 0, 0};
  body(s, h, io);
  apply_header(s, h);
  return RLM_OK;
}

void session_copy_state(SessionImpl* src, SessionImpl* dst) {
  session_end_pass(src);
  Header h;
  fill_header(src, &h);
  Io io{Mode::kCopy, nullptr, nullptr, 0,
        reinterpret_cast<uint8_t*>(dst) - reinterpret_cast<uint8_t*>(src)};
  body(src, h, io);
  dst->sp = src->sp;
  dst->sp.logit_bias = dst->bias;
  sampler_build_dry_breakers(&dst->sp, dst->tok, dst->model->hp.vocab_size, dst->piece,
                             dst->model->hp.max_token_text, &dst->ss);
  apply_header(dst, h);
}

}  // namespace ringlm::internal
