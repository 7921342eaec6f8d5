// Tokenizer over the model file's tables: encode text to ids and decode ids to bytes, writing
// only into caller buffers (no allocation, no global state).
//
// This header is the tokenizer's whole interface, for the runtime and for tools (the CLI's
// tokenize / detokenize work on a model's table or on one built from a vocabulary file): tables
// are fb::Tokenizer plus their vocab size, limits come from tokenizer/limits.h, and
// model_tokenizer() gives an open model's table. Everything else under runtime/tokenizer/ is
// internal to the implementation (tokenizer.cc lists the files).
#ifndef RINGLM_RUNTIME_TOKENIZER_H_
#define RINGLM_RUNTIME_TOKENIZER_H_

#include <stddef.h>
#include <stdint.h>

#include "model_generated.h"
#include "status.h"
#include "tokenizer/limits.h"

namespace ringlm::internal {

// Structural checks of the tokenizer tables, run once by model_open: vocab_size in
// [1, kMaxVocab], kind / pre-tokenizer / token types known, pieces, types and sorted_ids have
// vocab_size entries and scores none or vocab_size, piece lengths in [0, kMaxPieceBytes], every
// id (bos/eos/unk/pad/end ids/sorted ids/merge left, right and result) in range, sorted_ids
// non-decreasing by piece bytes, merges strictly ordered by (left, right). Once it passes,
// tokenize() and token_text() are memory-safe for any input. `longest_piece` (optional)
// receives the byte length of the longest piece (for token_text_bytes()).
Status verify_tokenizer(const fb::Tokenizer* tok, uint32_t vocab_size, ErrorSink* err,
                        uint32_t* longest_piece = nullptr);

// Scratch bytes tokenize() needs for a text of `text_len` bytes (any alignment). SentencePiece:
// about 39 per byte. ByteLevel: about 36 per byte, plus 4 per Control/UserDefined token and
// 1 KiB (so this scans the token types once, O(vocab)). SIZE_MAX when the text is too long to
// encode (over kMaxTokenizeText, 256 MiB). Measured by the same layout function tokenize_ex
// carves the buffer with.
size_t tokenize_scratch_bytes(const fb::Tokenizer* tok, size_t text_len);

// tokenize_ex flags.
enum TokenizeFlags : uint32_t {
  kTokenizeAddBos = 1u << 0,        // BOS first (when the model has one)
  kTokenizeParseSpecial = 1u << 1,  // ByteLevel: special-token text becomes its token
};

// Encodes UTF-8 `text` into `out` (capacity `cap`), BOS first when kTokenizeAddBos and the
// model has one (the caller decides; Tokenizer.add_bos is the model's default for it).
// RLM_ERR_CAPACITY when cap is too small (*n_out = the count needed); RLM_ERR_BUFFER_TOO_SMALL
// when scratch is. Invalid UTF-8 is never rejected: every byte of the text is encoded.
//
// SentencePiece tables: BPE as llama.cpp's llm_tokenizer_spm: spaces become "▁", a "▁" is
// prepended to non-empty text when add_space_prefix, then pairs merge by merge rank (merges
// present) or piece score; characters that end up outside the vocab become <0xNN> byte tokens
// (byte_fallback), else unk. Only Normal and UserDefined pieces are produced by merging, so
// text never encodes to a control token (kTokenizeParseSpecial is ignored). Invalid UTF-8 goes
// through byte fallback.
//
// ByteLevel tables (GPT-2 style, as llama.cpp's llm_tokenizer_bpe):
//   1. Special tokens (kTokenizeParseSpecial): every token of type Control or UserDefined with a
//      non-empty piece is special, whatever its text looks like (GGUF token types; Hugging Face
//      added_tokens: special -> Control, others -> UserDefined; tiktoken: the Llama 3 specials
//      128000..128255). The text is scanned left to right and, at each position, the longest
//      special piece that matches the raw text bytes there becomes its token (the lowest id
//      among equal pieces); the text between matches is encoded by steps 2-4. Differs from
//      llama.cpp (which takes the longest special tokens first over the whole text) only when
//      two special pieces overlap in the text. Without the flag nothing is special.
//   2. Pre-tokenizer (Tokenizer.pre_tokenizer) splits each piece of text into words: hand-written
//      equivalents of the regexes (checked against Python's `regex` module on random text).
//      (?i:...) folds ASCII only, as llama.cpp does (a Unicode-folding engine also takes
//      "'" + U+017F (long s) as "'s"):
//        Gpt2      's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//        Llama3    (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//                   ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//        Llama3Merges  the same as Llama3 (only step 3 differs)
//        Qwen2     Llama3 with \p{N} (single digits) for \p{N}{1,3}
//        StarCoder every \p{N} character alone, then Gpt2 on the text between digits
//        None      no split
//      Classes from runtime/unicode_tables.inc (see unicode.h); a byte that is not valid UTF-8 is
//      a one-byte character of class Other (llama.cpp reads it as U+FFFD) and is kept as is.
//   3. Each word's bytes map through GPT-2's bytes_to_unicode (one symbol per byte). With the
//      Llama3 pre-tokenizer a word that is a whole Normal/UserDefined piece is taken directly
//      (llama.cpp's ignore_merges, which Llama 3 sets); otherwise adjacent symbols merge by
//      Tokenizer.merges rank (lowest first, leftmost on ties).
//   4. A symbol left that is not a piece (a byte whose character is missing from the vocab)
//      becomes unk_id, or nothing when there is none.
Status tokenize_ex(const fb::Tokenizer* tok, uint32_t vocab_size, const char* text, size_t len,
                   uint32_t flags, int32_t* out, size_t cap, size_t* n_out, void* scratch,
                   size_t scratch_size, ErrorSink* err);

// tokenize_ex with kTokenizeParseSpecial, plus kTokenizeAddBos when add_bos.
Status tokenize(const fb::Tokenizer* tok, uint32_t vocab_size, const char* text, size_t len,
                bool add_bos, int32_t* out, size_t cap, size_t* n_out, void* scratch,
                size_t scratch_size, ErrorSink* err);

// Splits `text` into the pre-tokenizer's words (step 2 above, no special tokens): writes the end
// offset of each word to ends[0, min(count, cap)) and returns the count. Words are non-empty
// and cover the text in order. No allocation, O(len).
size_t pretokenize(fb::PreTokenizer pre, const char* text, size_t len, uint32_t* ends,
                   size_t cap);

// The bytes `token` contributes to text when it follows `prev` (-1 for none). Writes
// min(cap, needed) bytes and returns the number needed: never more than the token's piece, or 5
// (SentencePiece's unknown surface), so at most token_text_bytes(longest piece), the model's
// Hparams::max_token_text; `out` may be null with cap 0 (a size query). 0 for a token out of
// range. Control and unused tokens become nothing; <0xNN> byte tokens become that byte.
// SentencePiece: "▁" becomes " ", unknown tokens become " ⁇ " (SentencePiece's unk surface),
// and when add_space_prefix a leading space of a normal piece at the start of a text
// (prev == bos_id, or prev == -1) is dropped (SentencePiece's dummy-prefix rule).
// ByteLevel: Normal and Unknown pieces map back through GPT-2's unicode_to_bytes (a character
// outside that alphabet is copied as its UTF-8 bytes); UserDefined pieces are their raw text (as
// Hugging Face added tokens and llama.cpp store them). The result may be partial UTF-8: a
// character can span tokens.
size_t token_text(const fb::Tokenizer* tok, int32_t prev, int32_t token, char* out, size_t cap);

// token_text flag: control tokens render as their piece text (e.g. "<|eot_id|>") instead of
// nothing.
constexpr uint32_t kTokenTextSpecial = 1u << 0;

// token_text with flags (kTokenTextSpecial).
size_t token_text_ex(const fb::Tokenizer* tok, int32_t prev, int32_t token, uint32_t flags,
                     char* out, size_t cap);

// The id of a piece by its exact bytes (any token type; the lowest id among duplicates), or -1.
int32_t token_lookup(const fb::Tokenizer* tok, const char* piece, size_t len);

// The tokenizer table of a model rlm_model_open opened, verified (the functions above are
// memory-safe on it), with its vocab size in *vocab_size; null (and 0) for a null or unopened
// model. vocab_size may be null. For tools holding an rlm_model: no need for ModelImpl.
const fb::Tokenizer* model_tokenizer(const rlm_model* model, uint32_t* vocab_size);

}  // namespace ringlm::internal

#endif  // RINGLM_RUNTIME_TOKENIZER_H_
