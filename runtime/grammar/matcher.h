// The GBNF recognizer (#15): which texts a compiled grammar (gbnf.h) accepts, code point by code
// point, in a fixed memory budget.
//
// State: a set of parser stacks. A stack is a sequence of frames (an element position to continue
// at, and a repetition count for kRepeat frames); its top is always a character set ready to
// match the next code point, or the stack is empty: the grammar is complete on that path.
// Advancing by a code point keeps the stacks whose top set matches it, moves past the set and
// expands rule references, alternatives and repetitions until every stack is topped by a set
// again. Stacks are deduplicated, and every expansion step is memoised by the configuration it
// starts from (a 64-bit hash), so a grammar like `x? x? x? ...` costs linear work per code
// point, not exponential. Left recursion and unbounded repetition of something that can match
// nothing are refused at compile time, so expansion always ends.
//
// Memory: everything in a caller budget (matcher_layout: state_bytes, split into the current
// set, the next one and the expansion's scratch). A set that outgrows it is RLM_ERR_CAPACITY
// ("grammar state budget"), never an overrun; the state is then unchanged.
//
// UTF-8: matcher_accept_bytes takes bytes; a code point split across calls waits in the state
// until complete (`pending`). A prefix check (matcher_viable) accepts pending bytes when some
// stack could still match a code point that starts with them.
#ifndef RINGLM_RUNTIME_GRAMMAR_MATCHER_H_
#define RINGLM_RUNTIME_GRAMMAR_MATCHER_H_

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "grammar/gbnf.h"
#include "status.h"

namespace ringlm::internal {

struct MatchFrame {
  uint32_t pos;    // element index to continue at
  uint32_t count;  // repetitions done (when elems[pos] is kRepeat), else 0
};

// A set of stacks: stack k is frames[off[k], off[k] + len[k]), top last.
struct StackSet {
  MatchFrame* frames = nullptr;  // (cap_frames)
  uint32_t* off = nullptr;       // (cap_stacks)
  uint32_t* len = nullptr;       // (cap_stacks)
  uint64_t* hash = nullptr;      // (cap_stacks) of each stack's frames
  uint32_t n_frames = 0, n_stacks = 0;
};

struct Matcher {
  const Grammar* g = nullptr;
  uint32_t cap_frames = 0, cap_stacks = 0;
  StackSet cur, next, todo;    // todo: configurations waiting to be expanded
  MatchFrame* work = nullptr;  // (cap_frames) the configuration being expanded
  uint64_t* seen = nullptr;    // (seen_cap) open-addressing set of expanded configurations
  uint32_t* seen_used = nullptr;  // (seen_cap) its occupied slots, so clearing costs what was
  uint32_t n_seen_used = 0;       // inserted, not the whole table (a budget of MiBs is common)
  uint32_t seen_cap = 0;       // power of two
  uint32_t pending = 0;        // bits of an incomplete UTF-8 sequence
  uint8_t pending_len = 0;     // its bytes so far (0: none)
  uint8_t pending_need = 0;    // its total length
  uint8_t pending_lead = 0;    // its first byte
};

// A repetition count with this bit is "relaxed" (matcher_relax): the repetition may go on or stop
// at any time and its count stays as it is. Only the mask walk makes such states.
constexpr uint32_t kRepeatRelaxed = 1u << 31;

// Smallest state budget matcher_layout takes.
constexpr size_t kMatcherMinBytes = 4096;

// Lays out a matcher for `g` with `state_bytes` of state (>= kMatcherMinBytes) in `a`. After a
// real layout, call matcher_reset. Owns nothing; `g` must outlive it.
void matcher_layout(Arena& a, const Grammar* g, size_t state_bytes, Matcher* m);

// The start state (before any input). RLM_ERR_CAPACITY when even it does not fit.
Status matcher_reset(Matcher* m, ErrorSink* err);

// Feeds bytes. *accepted = false when byte `*n_used` (0-based) cannot continue the text: the
// state is then as before that byte (bytes before it were consumed). Invalid UTF-8 is rejected
// like any byte the grammar cannot take. RLM_ERR_CAPACITY when the state outgrows the budget
// (state as before the failing code point).
Status matcher_accept_bytes(Matcher* m, const uint8_t* bytes, size_t n, bool* accepted,
                            size_t* n_used, ErrorSink* err);

// Feeds one code point (no UTF-8 pending). *accepted as above; unchanged state when false.
Status matcher_accept_cp(Matcher* m, uint32_t cp, bool* accepted, ErrorSink* err);

// The text so far is a complete sentence of the grammar (no partial code point pending).
bool matcher_can_end(const Matcher& m);
// Complete, and nothing may follow: every stack is empty.
bool matcher_is_done(const Matcher& m);
// Some continuation exists: a stack is non-empty, and with a code point pending, some stack's
// top set can take a code point that starts with the pending bytes.
bool matcher_viable(const Matcher& m);

// The code points an incomplete UTF-8 sequence can still become: `len` of its `need` bytes read
// (len < need), their payload bits `value`, first byte `lead`. [*lo, *hi] (overlong forms and
// surrogates excluded).
void utf8_pending_range(uint32_t value, uint32_t len, uint32_t need, uint8_t lead, uint32_t* lo,
                        uint32_t* hi);

// Whether the character set at element `pos` of `g` takes some code point in [lo, hi].
bool matcher_set_intersects(const Grammar& g, uint32_t pos, uint32_t lo, uint32_t hi);

// The bytes that can come next, as a 256-bit set (bit b of out[b / 64]): a superset (for a
// negated set every non-ASCII lead byte is kept). With a partial code point pending: every byte.
void matcher_next_bytes(const Matcher& m, uint64_t out[4]);

// The state as words (pending bytes, then every stack's frames), for remembering and comparing
// states: key[0, *len) (capacity `cap` words) and its hash; false when it does not fit.
bool matcher_key(const Matcher& m, uint32_t* key, uint32_t cap, uint32_t* len, uint64_t* hash);

// Makes `m` the state `key` (from matcher_key on a matcher of the same grammar); false when it
// does not fit m's budget (m is then unchanged).
bool matcher_load_key(Matcher* m, const uint32_t* key, uint32_t len);

// Relaxes every bounded repetition of the state that has reached its minimum and has three
// counts or more (max - min >= 2: `x?` and `x{2,3}` stay exact, relaxing them would shrink the
// room and merge at most two states): its count becomes kRepeatRelaxed alone (the count it had
// is dropped, so states that differ only in such counts relax to one state); stacks made equal
// by that are kept once, and the stacks are sorted (matcher_sort_stacks). False when there was
// none. *room: the room of the state in code points, the least over the relaxed repetitions of
// (max - count) x m, where m is the fewest code points a repetition that consumes input takes:
// min_len[body] (a lower bound of the body rule's shortest match, as gbnf_min_lengths gives;
// null: 1 for every rule), at least 1. (The count includes the repetition under way, which may
// still take input: at count max the room is 0.)
// Why: the count of `x{0,30}` changes with every x, so the state inside such a string never
// repeats itself; relaxed, it does. For any input of at most *room code points the relaxed
// state accepts exactly what the state accepts: to go wrong the relaxed parse would have to
// start a repetition past the max and put a code point in it, after max - count repetitions of
// at least m code points each. (A repetition started but still empty at the input's end changes
// nothing: the parse that stops repeating there exists in both. Repetitions that consume nothing
// only raise a count: never needed to accept anything.) On longer inputs the relaxed state
// accepts a superset of what the state accepts.
bool matcher_relax(Matcher* m, const uint32_t* min_len, uint32_t* room);

// Puts the stacks in a canonical order (by their hash, then length and frames), so states that
// hold the same stacks have the same key (matcher_key) whatever order a step produced them in.
// The order of the stacks changes nothing the state accepts.
void matcher_sort_stacks(Matcher* m);

// Whether the character set at element `pos` of `g` (a stack's top) takes code point cp. A step
// (matcher_accept_cp) depends on the code point only through which stacks' tops take it.
bool matcher_set_takes(const Grammar& g, uint32_t pos, uint32_t cp);

// The same state: equal pending bytes and the same stacks in the same order.
bool matcher_same_state(const Matcher& a, const Matcher& b);

// Copies the state (stacks and pending bytes) of `from` into `to`, laid out for the same grammar
// with the same budget.
void matcher_copy(const Matcher& from, Matcher* to);

}  // namespace ringlm::internal

#endif  // RINGLM_RUNTIME_GRAMMAR_MATCHER_H_
