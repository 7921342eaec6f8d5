// A correctness oracle for the grammar token mask (#15). grammar_mask is optimised (first-byte
// groups ruled out unchecked, a per-walk table of what each code point does to the state, skips
// after a rejection, remembered masks per session); the reference here has none of that: for
// every token it copies the state, feeds the token's bytes to the recognizer and keeps the token
// when they are all taken and a pending partial code point can still continue. Tokens without
// bytes are allowed only when they end generation and the grammar may end.
//
// Random walks from each grammar's start over three vocabularies (single bytes; stories260K's
// SentencePiece tok512; GPT-2's byte-level BPE with multi-byte and partial-UTF-8 tokens): at every
// step the mask with no cache, with a large cache kept across steps and walks (later steps hit
// it), and with a two-entry cache (constant replacement) must each be exactly the reference's
// allowed set; then a token the reference allows is accepted (it must be) and the walk goes on,
// until the grammar is done, nothing is allowed, or the step limit. The reference of a state met
// again (equal stacks and pending bytes, compared by a key written here, not matcher_key) is
// reused; the masks are computed at every step. grammar_mask makes no heap calls once laid out.
//
// Bounded strings (masks derived from a relaxed state's, compiled.h): over a vocabulary of runs
// of every length (ASCII, 2-, 3- and 4-byte characters), runs ending in a quote at every
// position, escapes and partial characters, every count of `maxLength` strings and of bounded
// repetitions with bodies longer than one code point is visited (one character per step) and
// checked the same way, then random walks go through them.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "arena.h"
#include "fixtures.h"
#include "grammar/compiled.h"
#include "grammar/matcher.h"
#include "grammar_testing.h"
#include "heap_counter.h"
#include "model.h"
#include "ringlm/ringlm.h"
#include "status.h"
#include "testing.h"

namespace {

using namespace ringlm_test;
using ringlm::internal::fb::DType;
namespace rt = ringlm::internal;

// Under qemu-user (cross builds) the tests run the ringlm tool through the emulator.

// ---- vocabularies ------------------------------------------------------------------------------

// (a) 259 tokens: <unk> <s> </s> and the 256 single bytes (every partial UTF-8 state reachable).
const OpenedModel* byte_model() {
  static OpenedModel m;
  static bool ok = [] {
    RandomModelShape shape;
    shape.dim = 32;
    shape.n_layers = 1;
    shape.n_heads = 4;
    shape.n_kv_heads = 2;
    shape.ffn_dim = 48;
    std::string err;
    const bool opened = open_random_model(shape, DType::F32, &m, &err);
    EXPECT_TRUE(opened) << err;
    return opened;
  }();
  return ok ? &m : nullptr;
}

// (b) stories260K's tok512 (SentencePiece: "▁" pieces of several characters plus byte fallback).
// Null with *why set when ../shared does not have it.
const OpenedModel* tok512_model(std::string* why) {
  static OpenedModel m;
  static std::string err;
  static bool ok = open_stories260k(DType::F32, &m, &err);
  if (!ok) *why = err.empty() ? "../shared/models/stories260K not found" : err;
  return ok ? &m : nullptr;
}

// (c) GPT-2's 50257-token byte-level BPE vocabulary on a tiny random-weight model, built with
// `ringlm convert --synthetic CONFIG --vocab ggml-vocab-gpt-2.gguf`. Null with *why set when
// ../shared does not have the vocabulary or the conversion fails.
const OpenedModel* gpt2_model(std::string* why) {
  static OpenedModel m;
  static std::string err;
  static bool ok = [] {
    const std::string vocab = shared_path("tokenizers/vectors/ggml-vocab-gpt-2.gguf");
    if (vocab.empty()) {
      err = "../shared/tokenizers/vectors/ggml-vocab-gpt-2.gguf not found";
      return false;
    }
    const std::string dir = temp_dir();
    {
      std::ofstream f(dir + "/config.json");
      f << R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 32,
               "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 4,
               "intermediate_size": 48, "max_position_embeddings": 256, "rms_norm_eps": 1e-05,
               "tie_word_embeddings": true, "vocab_size": 50257})";
    }
    const std::string out = dir + "/gpt2-vocab.rlm";
    std::string log;
    if (run_command(ringlm_bin() + " convert --synthetic " + dir + "/config.json --vocab " + vocab +
                        " --quant q8 -q -o " + out + " 2>&1",
                    &log) != 0) {
      err = "ringlm convert failed: " + log;
      return false;
    }
    if (!read_file_aligned(out, &m.bytes)) {
      err = "cannot read " + out;
      return false;
    }
    return m.open(&err);
  }();
  if (!ok) *why = err;
  return ok ? &m : nullptr;
}

// ---- grammars ----------------------------------------------------------------------------------

struct NamedGrammar {
  std::string name;
  std::string gbnf;
};

// Hand-written grammars aimed at the mask's shortcuts: sets whose lead bytes span UTF-8 lengths
// (the first-byte filter), negated sets and `.` (every lead byte kept), code points that loop
// back to the same state and ones that do not (the code-point table), literals sharing prefixes
// (the skip after a rejection), counted and unbounded repetitions of multi-character bodies
// (counts saturate, so states repeat: the cache), and grammars that may end early (end tokens).
std::vector<NamedGrammar> hand_grammars() {
  return {
      {"non-ascii",
       "root ::= \"\u00e9\" ([\u03b1-\u03c9] | \"\u65e5\u672c\")+ [^a-z]{1,3} . "
       "\"\u00e9t\u00e9\"?\n"},
      {"utf8-bands",
       // Ranges crossing the 1/2/3-byte boundaries, 4-byte emoji, a negated set excluding
       // non-ASCII ranges, and a lone 3-byte literal after it.
       "root ::= [\\x70-\\u0801]{1,4} [\\U0001F600-\\U0001F64F]? ([^\\u00e9\\u0100-\\uffffa-z] | "
       "[\\u3041-\\u3096])* \"\u2713\"\n"},
      {"negated-and-any",
       "root ::= [^\"\\\\\\n]* \"\\\"\" ([^a-z\\n]+ | \"x\" .)? \"\\n\" .{0,2}\n"},
      {"repeats",
       "root ::= (\"ab\" | \"abc\" | [0-9]){2,5} (\"xy\" \"z\"?)* (\"q\" | \"qq\")+ \"!\"\n"},
      {"overlap",
       "root ::= \"foo\" | \"foobar\" | \"fo\" [o-z]+ | \"f\" .{1,3} | \"\u00e9l\u00e8ve\" | "
       "\"\u00e9t\u00e9\"\n"},
      {"strings-with-escapes",
       "root ::= \"[\" ws (str (ws \",\" ws str)*)? ws \"]\"\n"
       "str ::= \"\\\"\" ( [^\"\\\\\\x00-\\x1f] | "
       "\"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4} ) )* "
       "\"\\\"\"\n"
       "ws ::= [ \\t\\n]{0,3}\n"},
      {"optional-tail",
       "root ::= [a-z]+ (\".\" [a-z]{1,8})? (\"?\" | \"!\" | \" \" [A-Z] [a-z]*)?\n"},
      {"nested",
       "root ::= item\nitem ::= \"(\" (item (\" \" item)*)? \")\" | [0-9]+ | \"'\" [^']* \"'\"\n"},
      // Bounded repetitions with room (the walk relaxes them for tokens short enough): bodies of
      // one or two code points, nested counts, a tail that may stop early.
      {"bounded",
       "root ::= \"\\\"\" ([a-z ] | \"\\\\n\" | \"\u00e9\"){0,12} \"\\\"\" (\" \" [0-9]{1,6}){0,5} "
       "(\".\" (\"ab\" | \"c\" [xy]{0,5}){2,9})?\n"},
  };
}

std::vector<NamedGrammar> all_grammars() {
  std::vector<NamedGrammar> out = {{"json", rlm_json_gbnf()}};
  for (const char* s : {"strings_escapes_unicode.json", "pattern_format.json",
                        "optional_properties.json", "tool_call.json", "recursive_ref.json",
                        "numbers.json", "enums.json"}) {
    std::string err;
    std::string gbnf = schema_to_gbnf(schema_file(s), &err);
    EXPECT_TRUE(err.empty()) << s << ": " << err;
    out.push_back({s, gbnf});
  }
  for (NamedGrammar& g : hand_grammars()) out.push_back(std::move(g));
  return out;
}

// ---- the oracle --------------------------------------------------------------------------------


constexpr size_t kStateBytes = 256 * 1024;
constexpr size_t kCacheBytes = 1 << 20;

// One grammar on one model: the walk's parse state, the reference's trial matcher, and three
// mask scratches laid out as a session lays them out (no cache; a 1 MiB cache; a cache of two
// entries, so entries are replaced all the time). The scratches (and their caches) live as long
// as the oracle: across steps and walks.
class Oracle {
 public:
  Oracle(const Oracle&) = delete;
  Oracle& operator=(const Oracle&) = delete;
  Oracle(const rlm_model* model, const rlm_grammar* grammar)
      : m_(*rt::model_impl(model)), gi_(*reinterpret_cast<const rt::GrammarImpl*>(grammar)) {
    const uint32_t vocab = gi_.tokens.vocab;
    tiny_cache_bytes_ = 2 * rt::mask_cache_entry_bytes(vocab) + 5 * rt::kArenaAlignment;
    rt::Arena measure(nullptr, 0);
    layout(measure);
    mem_.resize(measure.used());
    rt::Arena a(mem_.data(), measure.used());
    layout(a);
    laid_out_ = a.ok() && a.used() == measure.used();
    for (rt::MaskScratch* ms : {&off_, &on_, &tiny_}) ms->trial.g = gi_.g;
    off_logits_.resize(vocab);
    on_logits_.resize(vocab);
    tiny_logits_.resize(vocab);
  }

  bool laid_out() const {
    return laid_out_ && on_.cache.n_entries > 2 && tiny_.cache.n_entries == 2;
  }
  // Masks derived from a relaxed state's (compiled.h), over the three scratches; and those whose
  // relaxed masks came from a cache.
  uint64_t derived() const { return off_.derived + on_.derived + tiny_.derived; }
  uint64_t derived_kept() const { return on_.derived_kept + tiny_.derived_kept; }
  const rt::TokenTable& tokens() const { return gi_.tokens; }
  rt::Matcher& state() { return state_; }
  const rt::MaskCache& cache() const { return on_.cache; }
  bool is_end(int32_t id) const { return rt::model_is_end_token(m_, id); }

  rt::Status reset() { return rt::matcher_reset(&state_, &sink_); }
  const char* error() const { return msg_; }

  // The three masks of the current state and the reference. "" when all four agree, else the
  // first differing token: its id, bytes and what each computation said. *heap_allocs gets the
  // heap calls the three grammar_mask calls made.
  std::string check(long* heap_allocs) {
    const uint32_t vocab = gi_.tokens.vocab;
    std::fill(off_logits_.begin(), off_logits_.end(), 0.0f);
    std::fill(on_logits_.begin(), on_logits_.end(), 0.0f);
    std::fill(tiny_logits_.begin(), tiny_logits_.end(), 0.0f);
    auto end = [this](int32_t id) { return rt::model_is_end_token(m_, id); };
    rt::Status st[3] = {RLM_OK, RLM_OK, RLM_OK};
    const HeapCalls calls = count_heap([&] {
      st[0] = rt::grammar_mask(gi_, state_, &off_, off_logits_.data(), end, &sink_);
      st[1] = rt::grammar_mask(gi_, state_, &on_, on_logits_.data(), end, &sink_);
      st[2] = rt::grammar_mask(gi_, state_, &tiny_, tiny_logits_.data(), end, &sink_);
    });
    *heap_allocs = calls.allocs;
    for (int k = 0; k < 3; ++k) {
      if (st[k] != RLM_OK) return "grammar_mask #" + std::to_string(k) + " failed: " + msg_;
    }
    const rt::TokenTable& t = gi_.tokens;
    // The reference: of a state met before (this grammar, any walk), its verdicts then.
    std::vector<uint32_t> key = state_words(state_);
    verdict_ = nullptr;
    for (const RefEntry& e : memo_) {
      if (e.key == key) verdict_ = &e.verdict;
    }
    if (!verdict_) {
      std::vector<uint8_t> fresh(vocab, 0);
      for (uint32_t u = 0; u < vocab; ++u) {
        const int32_t id = static_cast<int32_t>(u);
        const uint32_t n = t.length(id);
        if (n == 0) {
          fresh[u] = is_end(id) && rt::matcher_can_end(state_);
          continue;
        }
        rt::matcher_copy(state_, &ref_trial_);
        bool accepted = false;
        size_t used = 0;
        const rt::Status s =
            rt::matcher_accept_bytes(&ref_trial_, t.data(id), n, &accepted, &used, &sink_);
        if (s != RLM_OK) return std::string("reference: matcher_accept_bytes failed: ") + msg_;
        const bool allowed =
            accepted && (ref_trial_.pending_len == 0 || rt::matcher_viable(ref_trial_));
        fresh[u] = allowed | (allowed && !rt::matcher_same_state(ref_trial_, state_)) << 1 |
                   (allowed && ref_trial_.pending_len != 0) << 2;
      }
      if (memo_.size() >= kMemoStates) memo_.erase(memo_.begin());
      memo_.push_back({std::move(key), std::move(fresh)});
      verdict_ = &memo_.back().verdict;
    }
    for (uint32_t u = 0; u < vocab; ++u) {
      const bool off = off_logits_[u] != -INFINITY, on = on_logits_[u] != -INFINITY,
                 tiny = tiny_logits_[u] != -INFINITY, ref = allowed(u);
      if (off == ref && on == ref && tiny == ref) continue;
      const int32_t id = static_cast<int32_t>(u);
      std::string d = "token " + std::to_string(id) + " \"" + escape_bytes(t.data(id), t.length(id)) +
                      "\": reference " + (ref ? "allows" : "refuses") + " it; mask without cache " +
                      (off ? "allows" : "refuses") + ", with cache " + (on ? "allows" : "refuses") +
                      ", with a 2-entry cache " + (tiny ? "allows" : "refuses");
      if (state_.pending_len) d += " (a partial code point is pending)";
      return d;
    }
    return "";
  }

  // After check(): token id is allowed / moves the state somewhere else / ends inside a code
  // point.
  bool allowed(uint32_t id) const { return (*verdict_)[id] & 1; }
  bool moves(uint32_t id) const { return (*verdict_)[id] & 2; }
  bool cuts(uint32_t id) const { return (*verdict_)[id] & 4; }

 private:
  void layout(rt::Arena& a) {
    const uint32_t vocab = gi_.tokens.vocab;
    rt::matcher_layout(a, gi_.g, kStateBytes, &state_);
    rt::matcher_layout(a, gi_.g, kStateBytes, &ref_trial_);
    const uint32_t max_text = m_.hp.max_token_text;
    rt::mask_scratch_layout(a, vocab, max_text, kStateBytes, 0, &off_);
    rt::mask_scratch_layout(a, vocab, max_text, kStateBytes, kCacheBytes, &on_);
    rt::mask_scratch_layout(a, vocab, max_text, kStateBytes, tiny_cache_bytes_, &tiny_);
  }

  const rt::ModelImpl& m_;
  const rt::GrammarImpl& gi_;
  size_t tiny_cache_bytes_ = 0;
  AlignedBuffer mem_;
  bool laid_out_ = false;
  rt::Matcher state_, ref_trial_;
  rt::MaskScratch off_, on_, tiny_;
  std::vector<float> off_logits_, on_logits_, tiny_logits_;
  // The reference of the states met so far: per token, bit 0 allowed, bit 1 allowed and leads
  // elsewhere, bit 2 allowed and ends inside a code point (the oldest forgotten past
  // kMemoStates).
  struct RefEntry {
    std::vector<uint32_t> key;
    std::vector<uint8_t> verdict;
  };
  static constexpr size_t kMemoStates = 256;
  std::vector<RefEntry> memo_;
  const std::vector<uint8_t>* verdict_ = nullptr;
  char msg_[256] = "";
  rt::ErrorSink sink_{msg_, sizeof msg_};
};

struct WalkLimits {
  int walks;
  int steps;  // reference-checked steps per walk
};

struct WalkStats {
  long steps = 0;          // states checked
  long partial = 0;        // states whose mask allows some tokens and refuses others
  long pending = 0;        // states with a partial code point pending
  long completed = 0;      // walks that ended complete (done, or an end token chosen)
  uint64_t cache_hits = 0;
};

// Random walks of `g` over `model`: every state's masks checked against the reference. The next
// token is drawn from the allowed ones; on a third of the draws from those that change the state
// (so walks leave string loops and reach more states), on another third from those that end
// inside a code point (so states with a partial code point pending, which the walk handles apart,
// are met often).
void walk_grammar(const rlm_model* model, const NamedGrammar& g, WalkLimits lim, uint32_t seed,
                  WalkStats* stats) {
  SCOPED_TRACE("grammar " + g.name);
  CompiledGrammar cg(model, g.gbnf);
  ASSERT_EQ(cg.st, RLM_OK) << cg.msg << "\n" << g.gbnf;
  Oracle o(model, cg.g);
  ASSERT_TRUE(o.laid_out());
  const rt::TokenTable& t = o.tokens();
  std::mt19937 rng(seed);
  std::vector<int32_t> pool_all, pool_moving, pool_cut;
  for (int walk = 0; walk < lim.walks; ++walk) {
    ASSERT_EQ(o.reset(), RLM_OK) << o.error();
    std::vector<int32_t> taken;
    std::string text;
    for (int step = 0;; ++step) {
      long heap = 0;
      const std::string diff = o.check(&heap);
      ASSERT_EQ(diff, "") << "walk " << walk << ", step " << step << ", after tokens ["
                          << ::testing::PrintToString(taken) << "] = text \""
                          << escape_bytes(reinterpret_cast<const uint8_t*>(text.data()), text.size())
                          << "\"";
      ASSERT_EQ(heap, 0) << "grammar_mask made heap calls";
      ++stats->steps;
      if (o.state().pending_len) ++stats->pending;
      pool_all.clear();
      pool_moving.clear();
      pool_cut.clear();
      for (uint32_t id = 0; id < t.vocab; ++id) {
        if (!o.allowed(id)) continue;
        pool_all.push_back(static_cast<int32_t>(id));
        if (o.moves(id)) pool_moving.push_back(static_cast<int32_t>(id));
        if (o.cuts(id)) pool_cut.push_back(static_cast<int32_t>(id));
      }
      if (!pool_all.empty() && pool_all.size() < t.vocab) ++stats->partial;
      if (rt::matcher_is_done(o.state())) {
        ++stats->completed;
        break;
      }
      // Every vocabulary here holds all 256 single bytes, so a state reached through allowed
      // tokens always has a continuation (these grammars have no dead ends of their own): the
      // mask never lets a walk into a state where nothing may follow and the text is incomplete.
      ASSERT_FALSE(pool_all.empty())
          << "dead end: nothing allowed after tokens [" << ::testing::PrintToString(taken)
          << "] = text \"" << escape_bytes(reinterpret_cast<const uint8_t*>(text.data()), text.size())
          << "\"";
      if (step + 1 >= lim.steps) break;
      const uint32_t draw = rng() % 3;
      const std::vector<int32_t>& pool = draw == 1 && !pool_moving.empty() ? pool_moving
                                         : draw == 2 && !pool_cut.empty()  ? pool_cut
                                                                           : pool_all;
      const int32_t id = pool[rng() % pool.size()];
      if (t.length(id) == 0) {
        // An end token: the reference allows it only where the grammar may end.
        ASSERT_TRUE(o.is_end(id) && rt::matcher_can_end(o.state()));
        ++stats->completed;
        break;
      }
      bool accepted = false;
      ASSERT_EQ(rt::grammar_accept_token(*reinterpret_cast<const rt::GrammarImpl*>(cg.g),
                                         &o.state(), id, &accepted, nullptr),
                RLM_OK);
      ASSERT_TRUE(accepted) << "token " << id << " was allowed but not accepted";
      taken.push_back(id);
      text.append(reinterpret_cast<const char*>(t.data(id)), t.length(id));
    }
  }
  // The large cache was consulted across walks: every walk after the first starts in a state met
  // before, so it must have hit (and what it returned was checked above).
  if (lim.walks > 1) EXPECT_GT(o.cache().hits, 0u);
  stats->cache_hits += o.cache().hits;
}

void run_vocabulary(const rlm_model* model, WalkLimits lim,
                    const std::vector<NamedGrammar>& grammars, WalkStats* stats) {
  uint32_t seed = 1;
  for (const NamedGrammar& g : grammars) {
    walk_grammar(model, g, lim, 0x9e3779b9u * seed++, stats);
    if (::testing::Test::HasFatalFailure()) return;
  }
  printf("[ mask     ] %zu grammars: %ld states checked (%ld with a partial code point pending), "
         "%ld walks complete, %llu cache hits\n",
         grammars.size(), stats->steps, stats->pending, stats->completed,
         static_cast<unsigned long long>(stats->cache_hits));
  // The walks exercised what they are for: states whose masks are neither all nor nothing.
  EXPECT_GT(stats->partial, stats->steps / 2);
}

// ---- bounded repetitions ---------------------------------------------------------------------

// A vocabulary for the masks of states inside bounded repetitions: the synthetic byte tokens,
// every single character used below, runs of 2 to 45 letters (longer and shorter than any room
// left), runs of multi-byte characters, runs that end in a closing quote (and a comma, a brace)
// after 0 to 31 characters, escapes, tokens that end inside a character or start inside one.
const OpenedModel* bounded_model(std::string* why) {
  static OpenedModel m;
  static std::string err;
  static bool ok = [] {
    namespace conv = rt::conv;
    conv::TokenizerData t;
    if (!conv::synthetic_tokenizer(259, &t, &err)) return false;
    std::vector<std::string> pieces;
    const std::string letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRST";
    const std::vector<std::string> wide = {"\xc3\xa9", "\xe6\x97\xa5", "\xf0\x9f\x98\x80",
                                           "\xce\xb1"};  // é 日 😀 α
    for (size_t n = 2; n <= 45; ++n) {
      pieces.push_back(letters.substr(0, n));
      pieces.push_back(" " + letters.substr(0, n - 1));
    }
    for (const std::string& w : wide) {
      pieces.push_back(w);
      std::string run = w;
      for (int n = 2; n <= 14; ++n) {
        run += w;
        pieces.push_back(run);
        pieces.push_back("a" + run);
      }
      pieces.push_back(w + "\"");
      pieces.push_back("ab" + w + w + "\",");
      pieces.push_back(w.substr(0, w.size() - 1));      // ends inside it
      pieces.push_back("abc" + w.substr(0, 1));         // ... after three letters
      pieces.push_back(w.substr(1) + "\"");             // starts inside one
    }
    for (size_t n : {0u, 1u, 2u, 3u, 4u, 5u, 7u, 8u, 11u, 12u, 13u, 19u, 20u, 21u, 31u}) {
      const std::string run = letters.substr(0, n);
      pieces.push_back(run + "\"");
      pieces.push_back(run + "\",");
      pieces.push_back(run + "\"}");
      pieces.push_back(run + "\"]");
      pieces.push_back(run + "\\n");
    }
    for (const char* p : {"\\n", "\\\"", "\\\\", "\\u00e9", "a\\u", "\":\"", "\",\"", "{\"",
                          "[\"", "\", \"", "ab\\\"cd", "        ", "                        "}) {
      pieces.push_back(p);
    }
    for (std::string& p : pieces) {
      bool dup = false;
      for (const std::string& q : t.pieces) dup = dup || q == p;
      if (dup) continue;
      t.pieces.push_back(p);
      t.types.push_back(rt::fb::TokenType::Normal);
    }
    t.scores.assign(t.pieces.size(), 0.0f);
    t.add_space_prefix = false;
    RandomModelShape s;
    s.dim = 32;
    s.n_layers = 1;
    s.n_heads = 4;
    s.n_kv_heads = 2;
    s.ffn_dim = 32;
    conv::SyntheticShape shape;
    shape.name = "bounded-strings";
    shape.arch = llama_arch(s);
    conv::SyntheticOptions opts;
    opts.vocab = &t;
    conv::ModelData md;
    std::vector<uint8_t> bytes;
    if (!conv::synthetic_from_shape(shape, 1, opts, &md, &err) ||
        !conv::build_model_bytes(md, DType::F32, &bytes, &err)) {
      return false;
    }
    m.bytes.assign(bytes.data(), bytes.size());
    return m.open(&err);
  }();
  if (!ok) *why = err;
  return ok ? &m : nullptr;
}

// Schemas and grammars whose states count: strings with maxLength (and minLength), an array of
// them with maxItems, repetitions whose body takes two or more code points (the room is
// counted in the body's shortest match), nested counts, and whitespace runs.
std::vector<NamedGrammar> bounded_grammars() {
  std::vector<NamedGrammar> out;
  const char* schema =
      R"({"type":"object","properties":{"s":{"type":"string","maxLength":12},)"
      R"("t":{"type":"string","minLength":2,"maxLength":5},)"
      R"("u":{"type":"array","items":{"type":"string","maxLength":3},"maxItems":4}},)"
      R"("required":["s","t","u"]})";
  std::string err;
  out.push_back({"maxLength schema", schema_to_gbnf(schema, &err)});
  EXPECT_TRUE(err.empty()) << err;
  out.push_back({"two-code-point bodies",
                 "root ::= \"\\\"\" (\"ab\" | \"\u00e9\u00e9\" | \"\\\\n\"){0,9} \"\\\"\" "
                 "(\"[\" [a-z\u65e5]{0,4} \"]\"){1,5} [ ]{0,20} \"!\"\n"});
  out.push_back({"string then more letters",
                 "root ::= \"\\\"\" [a-z\u00e9\u65e5\U0001F600]{0,7} [a-f]* \"\\\"\" "
                 "([0-9]{2,30} | \"x\")\n"});
  return out;
}

// Feeds `text` one code point at a time (each a token of exactly its bytes), checking the masks
// at every state: every count of every bounded repetition on the way.
void check_every_count(const rlm_model* model, const NamedGrammar& g, const std::string& text,
                       uint64_t* derived, uint64_t* kept) {
  SCOPED_TRACE("grammar " + g.name + ", text " + text);
  CompiledGrammar cg(model, g.gbnf);
  ASSERT_EQ(cg.st, RLM_OK) << cg.msg << "\n" << g.gbnf;
  Oracle o(model, cg.g);
  ASSERT_TRUE(o.laid_out());
  const rt::TokenTable& t = o.tokens();
  // Twice over: the second time the cache (and the relaxed masks in it) is warm.
  for (int pass = 0; pass < 2; ++pass) {
    ASSERT_EQ(o.reset(), RLM_OK) << o.error();
    size_t at = 0;
    for (;;) {
      long heap = 0;
      ASSERT_EQ(o.check(&heap), "") << "pass " << pass << ", after \"" << text.substr(0, at) << "\"";
      ASSERT_EQ(heap, 0);
      if (at == text.size()) break;
      size_t n = 1;
      const uint8_t lead = static_cast<uint8_t>(text[at]);
      if (lead >= 0xF0) n = 4;
      else if (lead >= 0xE0) n = 3;
      else if (lead >= 0xC0) n = 2;
      int32_t id = -1;
      for (uint32_t u = 0; u < t.vocab && id < 0; ++u) {
        if (t.length(static_cast<int32_t>(u)) == n &&
            memcmp(t.data(static_cast<int32_t>(u)), text.data() + at, n) == 0) {
          id = static_cast<int32_t>(u);
        }
      }
      ASSERT_GE(id, 0) << "no token for \"" << text.substr(at, n) << "\"";
      ASSERT_TRUE(o.allowed(static_cast<uint32_t>(id))) << "\"" << text.substr(0, at + n) << "\"";
      bool accepted = false;
      ASSERT_EQ(rt::grammar_accept_token(*reinterpret_cast<const rt::GrammarImpl*>(cg.g),
                                         &o.state(), id, &accepted, nullptr),
                RLM_OK);
      ASSERT_TRUE(accepted);
      at += n;
    }
  }
  *derived += o.derived();
  *kept += o.derived_kept();
}

TEST(GrammarMask, BoundedRepetitionsMatchReferenceAtEveryCount) {
  std::string why;
  const OpenedModel* m = bounded_model(&why);
  ASSERT_NE(m, nullptr) << why;
  const std::vector<NamedGrammar> grammars = bounded_grammars();
  ASSERT_EQ(grammars.size(), 3u);
  uint64_t derived = 0, kept = 0;
  check_every_count(&m->model, grammars[0],
                    "{\"s\":\"ab\xc3\xa9\xe6\x97\xa5\xf0\x9f\x98\x80\\n\\\"xyz12\",\"t\":\"\xce\xb1"
                    "bcd\\u00e9\",\"u\":[\"a\xc3\xa9\\n\",\"\",\"xyz\",\"q\"]}",
                    &derived, &kept);
  check_every_count(&m->model, grammars[0],
                    "{\"s\":\"\",\"t\":\"ab\",\n  \"u\":[]}", &derived, &kept);
  check_every_count(&m->model, grammars[1],
                    "\"ab\xc3\xa9\xc3\xa9\\nabababab\\nab\"[abcd][][\xe6\x97\xa5][a][]         !",
                    &derived, &kept);
  check_every_count(&m->model, grammars[2],
                    "\"a\xc3\xa9\xe6\x97\xa5\xf0\x9f\x98\x80" "bcdabcdef\"0123456789012345678901234"
                    "56789",
                    &derived, &kept);
  // The states inside the repetitions were derived, and with a cache from remembered masks.
  EXPECT_GT(derived, 50u);
  EXPECT_GT(kept, 20u);
  // Random walks through the same grammars (long tokens, quotes inside them, partial
  // characters drawn often).
  WalkStats stats;
  run_vocabulary(&m->model, {light() ? 4 : 12, light() ? 60 : 200}, grammars, &stats);
  EXPECT_GT(stats.pending, 0);
}

TEST(GrammarMask, ByteVocabularyMatchesReference) {
  const OpenedModel* m = byte_model();
  ASSERT_NE(m, nullptr);
  WalkStats stats;
  run_vocabulary(&m->model, {light() ? 4 : 16, light() ? 100 : 400}, all_grammars(), &stats);
  // Single bytes split every non-ASCII character: partial code points pending were checked.
  EXPECT_GT(stats.pending, 0);
  EXPECT_GT(stats.completed, 0);
  EXPECT_GT(stats.cache_hits, 0u);
}

TEST(GrammarMask, Tok512MatchesReference) {
  std::string why;
  const OpenedModel* m = tok512_model(&why);
  if (!m) {
    if (!why.empty() && why.find("not found") == std::string::npos) FAIL() << why;
    GTEST_SKIP() << why;
  }
  WalkStats stats;
  run_vocabulary(&m->model, {light() ? 3 : 12, light() ? 60 : 300}, all_grammars(), &stats);
  EXPECT_GT(stats.completed, 0);
}

TEST(GrammarMask, Gpt2ByteLevelMatchesReference) {
  std::string why;
  const OpenedModel* m = gpt2_model(&why);
  if (!m) {
    if (why.find("not found") == std::string::npos) FAIL() << why;
    GTEST_SKIP() << why;
  }
  // 50257 tokens: every state met for the first time feeds every token to the reference.
  WalkStats stats;
  run_vocabulary(&m->model, {light() ? 2 : 3, light() ? 2 : 40}, all_grammars(), &stats);
  // Byte-level tokens end inside UTF-8 characters: partial code points pending were checked.
  EXPECT_GT(stats.pending, 0);
}

}  // namespace
