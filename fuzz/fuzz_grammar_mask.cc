// The grammar token mask (runtime/grammar/compiled.h grammar_mask) against a brute-force
// reference, #15.
//
// Input: [grammar][mode] then, when grammar >= kBuiltins, GBNF text up to a 0xFF byte; the rest
// chooses tokens (a byte for the pool, one or two for the token in it). grammar < kBuiltins
// picks a built-in grammar (any JSON, a schema, hand-written ones aimed at the mask's
// shortcuts). mode bit 0: the vocabulary (the 259-token byte model, or a model whose
// SentencePiece vocabulary adds multi-character, non-ASCII, partial-UTF-8 and invalid-UTF-8
// pieces and " tokN" pieces sharing prefixes, next to the byte tokens); bits 1-2: the
// parse-state budget (64, 16, 4 or 64 KiB).
//
// A walk from the grammar's start, at most 32 tokens (16 with the larger vocabulary): at every
// state, grammar_mask with no cache, with a cache kept for the whole walk and with a two-entry
// cache (replaced constantly) is compared with the reference (every token: copy the state, feed
// its bytes; allowed when all are taken and a pending partial code point can still continue; a
// token without bytes only when it ends generation and the grammar may end). Properties:
//  - compile succeeds or fails with RLM_ERR_GRAMMAR / RLM_ERR_INVALID_UTF8 and a "line L, column
//    C" message; a start state over the budget is RLM_ERR_CAPACITY with a message;
//  - the three masks have the same status; RLM_ERR_CAPACITY only when the reference also
//    outgrows the budget on some token (the walk feeds nothing the reference does not);
//  - without capacity errors, all three masks equal the reference exactly (-inf patterns);
//  - the chosen token (the input picks among the allowed ones, those that change the state, or
//    those that end inside a code point) is accepted by grammar_accept_token;
//  - built-in grammars (no dead ends of their own; both vocabularies hold all 256 bytes): every
//    state reached has an allowed token;
//  - scratch laid out afresh over the memory the walk used (a session initialised again in the
//    same block: stale contents left there) gives the same masks for the walk's states, visited
//    again last first.
// The reference of a state met again in the walk (equal stacks and pending bytes, compared by a
// key written here, not matcher_key) is reused; the three masks are computed every step.
// Each input lays out fresh scratch (no cache outlives its grammar's memory).
#include <math.h>
#include <string.h>

#include <string>
#include <vector>

#include "arena.h"
#include "convert/convert.h"
#include "convert/synthetic.h"
#include "fixtures.h"
#include "fuzz_common.h"
#include "grammar/compiled.h"
#include "grammar/matcher.h"
#include "grammar_testing.h"
#include "model.h"

using namespace ringlm::internal;
using namespace ringlm_fuzz;

namespace {

// Steps per walk: each checks every token against the reference, so fewer with the larger
// vocabulary (an input stays near 10 ms in the sanitized libFuzzer build).
constexpr uint32_t kMaxStepsBytes = 32, kMaxStepsRich = 16;

// ---- models ----------------------------------------------------------------------------------

struct Model {
  ringlm_test::AlignedBuffer bytes;
  rlm_model m;
};

Model* models[2];

// Multi-byte pieces: multi-character ASCII, whole non-ASCII characters of every UTF-8 length,
// their prefixes and suffixes alone and glued to others (tokens that end or start inside a
// character), invalid sequences (overlong, surrogate, above U+10FFFF, stray bytes), and pieces
// with equal bytes to byte tokens or to each other's prefixes. SentencePiece Normal pieces are
// copied byte for byte ("▁" becomes a space).
std::vector<std::string> rich_pieces() {
  // Glued in pairs (every order) to make two-character pieces.
  const std::vector<std::string> paired = {
      "a", "0", "\"", "\\", " ", "{", ",",
      "\xc3\xa9",           // é U+00E9
      "\xe0\xa0\x80",       // U+0800 (the first 3-byte code point)
      "\xe6\x97\xa5",       // 日
      "\xce\xb1",           // α
      "\xf0\x9f\x98\x80"};  // 😀
  // Only as they are (and cut).
  const std::vector<std::string> single = {
      "\xdf\xbf",      // U+07FF (the last 2-byte code point)
      "\xe2\x9c\x93",  // ✓
      "\xef\xbf\xbf",  // U+FFFF
      "\xf4\x8f\xbf\xbf"};  // U+10FFFF
  std::vector<std::string> out;
  for (const std::string& a : paired) {
    for (const std::string& b : paired) out.push_back(a + b);
  }
  std::vector<std::string> chars = paired;
  chars.insert(chars.end(), single.begin(), single.end());
  for (const std::string& c : chars) {
    if (c.size() > 1) out.push_back(c);
    for (size_t k = 1; k < c.size(); ++k) {
      out.push_back(c.substr(0, k));        // a prefix alone
      out.push_back(c.substr(k));           // a suffix alone
      out.push_back("a" + c.substr(0, k));  // ends inside a character
      out.push_back(c.substr(k) + "\"");    // starts inside one
      out.push_back(c.substr(k) + "\xc3");  // inside one to inside the next
    }
  }
  for (const char* s :
       {"true", "tru", "false", "null", "nul", "\":", "\",\"", "\\n", "\\u", "\\u00e9", "\\\"",
        "{\"", "\"}", "[1", "12", "123", "1.5", "-1", "e+", "ab", "abc", "abd", "abcd", "foo",
        "foobar", "fo", "oo", "\xe6\x97\xa5\xe6\x9c\xac", "\xce\xb1\xce\xb2\xce\xb3", "  ", "\n  ",
        "\n\t", "xy", "xyz", "qq", "!", "?", "\xc3\xa9t\xc3\xa9", "\xe2\x96\x81word",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "\xc0\x80", "\xe0\x80\x80", "\xed\xa0\x80",
        "\xf4\x90\x80\x80", "\xf5", "\xff", "a\xff", "\xc3\xa9\xff", "\xed\x9f\xbf"}) {
    out.push_back(s);
  }
  return out;
}

bool build_model(bool rich, Model* out, std::string* err) {
  ringlm_test::RandomModelShape s;
  s.dim = 32;
  s.n_layers = 1;
  s.n_heads = 4;
  s.n_kv_heads = 2;
  s.ffn_dim = 32;
  s.max_context = 64;
  std::vector<uint8_t> bytes;
  if (!rich) {
    if (!ringlm_test::random_model(s, fb::DType::F32, &out->bytes, err)) return false;
  } else {
    // The synthetic vocabulary's specials, 256 byte tokens and 16 " tokN" pieces, then ours.
    conv::TokenizerData t;
    if (!conv::synthetic_tokenizer(259 + 16, &t, err)) return false;
    for (std::string& p : rich_pieces()) {
      bool dup = false;
      for (const std::string& q : t.pieces) dup = dup || q == p;
      if (dup) continue;
      t.pieces.push_back(p);
      t.types.push_back(fb::TokenType::Normal);
    }
    t.scores.assign(t.pieces.size(), 0.0f);
    t.add_space_prefix = false;
    conv::SyntheticShape shape;
    shape.name = "fuzz-grammar-mask";
    shape.arch = ringlm_test::llama_arch(s);
    conv::SyntheticOptions opts;
    opts.vocab = &t;
    conv::ModelData md;
    if (!conv::synthetic_from_shape(shape, 1, opts, &md, err) ||
        !conv::build_model_bytes(md, fb::DType::F32, &bytes, err)) {
      return false;
    }
    out->bytes.assign(bytes.data(), bytes.size());
  }
  const rlm_status st = rlm_model_open(out->bytes.data(), out->bytes.size(), &out->m);
  if (st != RLM_OK) *err = rlm_model_error(&out->m);
  return st == RLM_OK;
}

// ---- grammars --------------------------------------------------------------------------------

constexpr uint32_t kBuiltins = 11;

const char* const kSchema =
    R"({"type":"object","properties":{"name":{"enum":["get_weather","\u65e5\u672c\u8a9e"]},)"
    R"("args":{"type":"object","properties":{"city":{"type":"string","maxLength":12},)"
    R"("days":{"type":"integer","minimum":1,"maximum":14}},"required":["city"]}},)"
    R"("required":["name","args"]})";

std::vector<std::string> builtins;

void build_grammars() {
  builtins.push_back(rlm_json_gbnf());
  // A schema's GBNF (objects, enums with non-ASCII text, bounded strings, integer ranges).
  {
    const size_t len = strlen(kSchema);
    std::vector<uint8_t> scratch(rlm_json_schema_scratch_bytes(kSchema, len) + 64);
    void* sp = scratch.data() + (64 - reinterpret_cast<uintptr_t>(scratch.data()) % 64) % 64;
    size_t n = 0;
    char msg[256] = "";
    std::string text(1 << 16, '\0');
    const rlm_status st = rlm_json_schema_to_gbnf(kSchema, len, sp, scratch.size() - 64, &text[0],
                                                  text.size(), &n, msg, sizeof msg);
    FUZZ_CHECK(st == RLM_OK, "schema: %s", msg);
    text.resize(n);
    builtins.push_back(text);
  }
  builtins.push_back(
      "root ::= \"\u00e9\" ([\u03b1-\u03c9] | \"\u65e5\u672c\")+ [^a-z]{1,3} . "
      "\"\u00e9t\u00e9\"?\n");
  builtins.push_back(
      "root ::= [\\x70-\\u0801]{1,4} [\\U0001F600-\\U0001F64F]? ([^\\u00e9\\u0100-\\uffffa-z] | "
      "[\\u3041-\\u3096])* \"\u2713\"\n");
  builtins.push_back("root ::= [^\"\\\\\\n]* \"\\\"\" ([^a-z\\n]+ | \"x\" .)? \"\\n\" .{0,2}\n");
  builtins.push_back(
      "root ::= (\"ab\" | \"abc\" | [0-9]){2,5} (\"xy\" \"z\"?)* (\"q\" | \"qq\")+ \"!\"\n");
  builtins.push_back(
      "root ::= \"foo\" | \"foobar\" | \"fo\" [o-z]+ | \"f\" .{1,3} | \"\u00e9l\u00e8ve\" | "
      "\"\u00e9t\u00e9\"\n");
  builtins.push_back(
      "root ::= \"[\" ws (str (ws \",\" ws str)*)? ws \"]\"\n"
      "str ::= \"\\\"\" ( [^\"\\\\\\x00-\\x1f] | "
      "\"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4} ) )* "
      "\"\\\"\"\n"
      "ws ::= [ \\t\\n]{0,3}\n");
  builtins.push_back(
      "root ::= [a-z]+ (\".\" [a-z]{1,8})? (\"?\" | \"!\" | \" \" [A-Z] [a-z]*)?\n");
  builtins.push_back(
      "root ::= item\nitem ::= \"(\" (item (\" \" item)*)? \")\" | [0-9]+ | \"'\" [^']* \"'\"\n");
  builtins.push_back(
      "root ::= \"\\\"\" ([a-z ] | \"\\\\n\" | \"\u00e9\"){0,12} \"\\\"\" (\" \" [0-9]{1,6}){0,5} "
      "(\".\" (\"ab\" | \"c\" [xy]{0,5}){2,9})?\n");
  FUZZ_CHECK(builtins.size() == kBuiltins, "%zu built-in grammars", builtins.size());
}

// ---- the walk --------------------------------------------------------------------------------


// The reference of one state: per token, bit 0 allowed, bit 1 allowed and leads elsewhere, bit 2
// allowed and ends inside a code point.
struct RefEntry {
  std::vector<uint32_t> key;
  std::vector<uint8_t> verdict;
};

int32_t id_of(uint32_t u) { return static_cast<int32_t>(u); }

struct Scratch {
  Matcher state, ref;
  MaskScratch off, on, tiny;
};

void layout(Arena& a, const Grammar* g, uint32_t vocab, uint32_t max_text, size_t budget,
            Scratch* s) {
  matcher_layout(a, g, budget, &s->state);
  matcher_layout(a, g, budget, &s->ref);
  mask_scratch_layout(a, vocab, max_text, budget, 0, &s->off);
  mask_scratch_layout(a, vocab, max_text, budget, 64 * 1024, &s->on);
  mask_scratch_layout(a, vocab, max_text, budget,
                      2 * mask_cache_entry_bytes(vocab) + 5 * kArenaAlignment, &s->tiny);
}

// A session initialised again in the same block: everything laid out afresh over the memory the
// walk used (its stale contents left there), then the walk's states visited again, the last one
// first (so no state comes at the same walk count as before), each mask (no cache) equal to the
// reference found for that state before (`memo`).
template <class IsEnd>
void revisit(const GrammarImpl& gi, size_t budget, IsEnd is_end, const std::vector<RefEntry>& memo,
             const std::vector<int32_t>& taken, Aligned* mem) {
  const uint32_t vocab = gi.tokens.vocab;
  Arena a(mem->data(), mem->size());
  Scratch s;
  layout(a, gi.g, vocab, gi.tokens.max_len, budget, &s);
  FUZZ_CHECK(a.ok() && a.used() == mem->size(), "second layout differs");
  s.off.trial.g = gi.g;
  std::vector<float> logits(vocab);
  auto check = [&](size_t k) {
    const std::vector<uint32_t> key = ringlm_test::state_words(s.state);
    const RefEntry* known = nullptr;
    for (const RefEntry& e : memo) {
      if (e.key == key) known = &e;
    }
    if (!known) return;  // the walk's last state, not checked
    std::fill(logits.begin(), logits.end(), 0.0f);
    FUZZ_CHECK(grammar_mask(gi, s.state, &s.off, logits.data(), is_end, nullptr) == RLM_OK,
               "mask over reused memory");
    for (uint32_t u = 0; u < vocab; ++u) {
      const bool r = known->verdict[u] & 1, got = logits[u] != -INFINITY;
      FUZZ_CHECK(got == r, "over reused memory: token %u \"%s\": reference %d, mask %d, after %zu "
                 "tokens", u, ringlm_test::escape_bytes(gi.tokens.data(id_of(u)), gi.tokens.length(id_of(u))).c_str(),
                 r, got, k);
    }
  };
  auto accept = [&](int32_t id) {
    bool accepted = false;
    FUZZ_CHECK(grammar_accept_token(gi, &s.state, id, &accepted, nullptr) == RLM_OK && accepted,
               "replay of token %d", id);
  };
  FUZZ_CHECK(matcher_reset(&s.state, nullptr) == RLM_OK, "reset");
  for (int32_t id : taken) accept(id);
  check(taken.size());
  FUZZ_CHECK(matcher_reset(&s.state, nullptr) == RLM_OK, "reset");
  for (size_t k = 0; k < taken.size(); ++k) {
    check(k);
    accept(taken[k]);
  }
}

void walk(const ModelImpl& m, const GrammarImpl& gi, size_t budget, bool builtin,
          uint32_t max_steps, Reader& in) {
  const TokenTable& t = gi.tokens;
  const uint32_t vocab = t.vocab;
  Arena measure(nullptr, 0);
  Scratch probe;
  layout(measure, gi.g, vocab, gi.tokens.max_len, budget, &probe);
  Aligned mem;
  mem.resize_fill(measure.used(), 0);
  Arena a(mem.data(), measure.used());
  Scratch s;
  layout(a, gi.g, vocab, gi.tokens.max_len, budget, &s);
  FUZZ_CHECK(a.ok() && a.used() == measure.used(), "scratch layout differs from its measure");
  FUZZ_CHECK(s.on.cache.n_entries > 2 && s.tiny.cache.n_entries == 2, "cache entries %u / %u",
             s.on.cache.n_entries, s.tiny.cache.n_entries);
  s.off.trial.g = s.on.trial.g = s.tiny.trial.g = gi.g;

  char msg[256] = "";
  ErrorSink err{msg, sizeof msg};
  const Status rs = matcher_reset(&s.state, &err);
  if (rs != RLM_OK) {
    FUZZ_CHECK(rs == RLM_ERR_CAPACITY && msg[0], "reset: status %d '%s'", rs, msg);
    return;
  }
  auto is_end = [&m](int32_t id) { return model_is_end_token(m, id); };
  std::vector<float> l_off(vocab), l_on(vocab), l_tiny(vocab);
  std::vector<RefEntry> memo;  // states met in this walk (their reference computed once)
  std::vector<int32_t> pool_all, pool_moving, pool_cut;
  std::string text;             // what the walk has accepted (for messages)
  std::vector<int32_t> taken;  // and its tokens
  for (uint32_t step = 0; step < max_steps; ++step) {
    std::fill(l_off.begin(), l_off.end(), 0.0f);
    std::fill(l_on.begin(), l_on.end(), 0.0f);
    std::fill(l_tiny.begin(), l_tiny.end(), 0.0f);
    const Status s_off = grammar_mask(gi, s.state, &s.off, l_off.data(), is_end, &err);
    const Status s_on = grammar_mask(gi, s.state, &s.on, l_on.data(), is_end, &err);
    const Status s_tiny = grammar_mask(gi, s.state, &s.tiny, l_tiny.data(), is_end, &err);
    const std::string so_far = ringlm_test::escape_bytes(reinterpret_cast<const uint8_t*>(text.data()), text.size());
    FUZZ_CHECK(s_off == s_on && s_off == s_tiny, "mask statuses %d / %d / %d after \"%s\"", s_off,
               s_on, s_tiny, so_far.c_str());
    FUZZ_CHECK(s_off == RLM_OK || s_off == RLM_ERR_CAPACITY, "mask status %d '%s'", s_off, msg);
    // The reference (a state met before in this walk: its verdicts then).
    bool ref_capacity = false;
    std::vector<uint32_t> key = ringlm_test::state_words(s.state);
    const RefEntry* known = nullptr;
    for (const RefEntry& e : memo) {
      if (e.key == key) known = &e;
    }
    std::vector<uint8_t> fresh;
    if (!known) {
      fresh.assign(vocab, 0);
      for (uint32_t u = 0; u < vocab; ++u) {
        const int32_t id = static_cast<int32_t>(u);
        const uint32_t n = t.length(id);
        if (n == 0) {
          fresh[u] = is_end(id) && matcher_can_end(s.state);
          continue;
        }
        matcher_copy(s.state, &s.ref);
        bool accepted = false;
        size_t used = 0;
        const Status st = matcher_accept_bytes(&s.ref, t.data(id), n, &accepted, &used, &err);
        if (st != RLM_OK) {
          FUZZ_CHECK(st == RLM_ERR_CAPACITY && msg[0], "reference: status %d '%s'", st, msg);
          ref_capacity = true;
          break;
        }
        const bool allowed = accepted && (s.ref.pending_len == 0 || matcher_viable(s.ref));
        fresh[u] = allowed | (allowed && !matcher_same_state(s.ref, s.state)) << 1 |
                   (allowed && s.ref.pending_len != 0) << 2;
      }
      if (!ref_capacity) {
        memo.push_back({std::move(key), std::move(fresh)});
        known = &memo.back();
      }
    }
    if (s_off == RLM_ERR_CAPACITY) {
      FUZZ_CHECK(ref_capacity, "the mask outgrew the budget, the reference did not, after \"%s\"",
                 so_far.c_str());
    }
    if (s_off != RLM_OK || ref_capacity) return;  // nothing to compare
    pool_all.clear();
    pool_moving.clear();
    pool_cut.clear();
    for (uint32_t u = 0; u < vocab; ++u) {
      const bool r = known->verdict[u] & 1, off = l_off[u] != -INFINITY, on = l_on[u] != -INFINITY,
                 tiny = l_tiny[u] != -INFINITY;
      FUZZ_CHECK(off == r && on == r && tiny == r,
                 "token %u \"%s\": reference %d, mask without cache %d, with cache %d, with a "
                 "2-entry cache %d; after \"%s\" (step %u, pending %u bytes)",
                 u, ringlm_test::escape_bytes(t.data(id_of(u)), t.length(id_of(u))).c_str(), r, off, on, tiny,
                 so_far.c_str(), step, s.state.pending_len);
      if (r) {
        pool_all.push_back(static_cast<int32_t>(u));
        if (known->verdict[u] & 2) pool_moving.push_back(static_cast<int32_t>(u));
        if (known->verdict[u] & 4) pool_cut.push_back(static_cast<int32_t>(u));
      }
    }
    if (matcher_is_done(s.state)) break;
    if (builtin) {
      FUZZ_CHECK(!pool_all.empty(), "dead end: nothing allowed after \"%s\"", so_far.c_str());
    }
    if (pool_all.empty() || in.empty()) break;
    const uint8_t draw = in.u8() % 3;
    const std::vector<int32_t>& pool = draw == 1 && !pool_moving.empty() ? pool_moving
                                       : draw == 2 && !pool_cut.empty()  ? pool_cut
                                                                         : pool_all;
    const int32_t id = pool[in.range(0, static_cast<uint32_t>(pool.size() - 1))];
    if (t.length(id) == 0) break;  // an end token: the text is complete
    bool accepted = false;
    const Status as = grammar_accept_token(gi, &s.state, id, &accepted, &err);
    FUZZ_CHECK(as == RLM_OK && accepted, "token %d allowed but not accepted (status %d '%s')", id,
               as, msg);
    text.append(reinterpret_cast<const char*>(t.data(id)), t.length(id));
    taken.push_back(id);
  }
  revisit(gi, budget, is_end, memo, taken, &mem);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  for (int i = 0; i < 2; ++i) {
    models[i] = new Model;
    std::string err;
    if (!build_model(i == 1, models[i], &err)) {
      fprintf(stderr, "fuzz_grammar_mask: model build failed: %s\n", err.c_str());
      abort();
    }
  }
  build_grammars();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint8_t which = data[0], mode = data[1];
  data += 2;
  size -= 2;
  const bool builtin = which < kBuiltins;
  std::vector<char> gtext;
  if (builtin) {
    gtext.assign(builtins[which].begin(), builtins[which].end());
  } else {
    const uint8_t* sep = static_cast<const uint8_t*>(memchr(data, 0xFF, size));
    const size_t glen = sep ? static_cast<size_t>(sep - data) : size;
    gtext.assign(data, data + glen);  // exactly its size: a read past it is an ASan report
    data += sep ? glen + 1 : glen;
    size -= sep ? glen + 1 : glen;
  }
  const Model& md = *models[mode & 1];
  static const size_t kBudgets[4] = {64 * 1024, 16 * 1024, kMatcherMinBytes, 64 * 1024};
  const size_t budget = kBudgets[(mode >> 1) & 3];
  const ModelImpl& m = *model_impl(&md.m);

  const size_t need = grammar_bytes(m, gtext.size());
  FUZZ_CHECK(need != SIZE_MAX, "grammar_bytes(%zu)", gtext.size());
  Aligned gmem;
  gmem.resize_fill(need, 0);
  char msg[256] = "";
  ErrorSink err{msg, sizeof msg};
  GrammarImpl* gi = nullptr;
  const Status st = grammar_compile(m, gtext.empty() ? nullptr : gtext.data(), gtext.size(),
                                    gmem.data(), need, &gi, &err);
  if (st != RLM_OK) {
    FUZZ_CHECK(!builtin, "built-in grammar %u: %s", which, msg);
    FUZZ_CHECK(st == RLM_ERR_GRAMMAR || st == RLM_ERR_INVALID_UTF8, "compile status %d '%s'", st,
               msg);
    FUZZ_CHECK(strstr(msg, "line ") != nullptr && strstr(msg, "column ") != nullptr,
               "message without a location: '%s'", msg);
    return 0;
  }
  Reader in(data, size);
  walk(m, *gi, budget, builtin, mode & 1 ? kMaxStepsRich : kMaxStepsBytes, in);
  return 0;
}
