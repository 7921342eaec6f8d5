// The tokenizer's entry points: argument checks, the scratch layout, and dispatch to the
// encoder of the table's kind. The work lives in runtime/tokenizer/:
//   pieces.*        piece look-up over sorted_ids, token type bits, the output sink
//   bpe.*           the merge core (linked symbols + indexed min-heap) both encoders share
//   spm.*           the SentencePiece encoder
//   byte_level.*    the GPT-2 style byte-level encoder (special tokens, words, merges)
//   pretokenizer.*  the byte-level pre-tokenizers (regex equivalents) and pretokenize()
//   verify.cc       verify_tokenizer
//   decode.cc       token_text / token_text_ex
//   limits.h        kMaxVocab, kMaxPieceBytes, kMaxTokenizeText (shared with model.cc)
//
// SCRATCH: tokenize_layout() below is the one description of the caller's scratch buffer.
// tokenize_scratch_bytes runs it over a measuring Arena and tokenize_ex over the caller's
// memory, so the size query and the carving cannot drift. The caller's buffer may have any
// alignment: the layout starts at its first kScratchAlign-aligned byte, hence the slack.
#include "tokenizer.h"

#include "arena.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pieces.h"
#include "tokenizer/spm.h"

namespace ringlm::internal {

namespace {

// Alignment of the layout's start: enough for every block (Sym: 4, heap keys: 8).
constexpr size_t kScratchAlign = 8;
// Bytes the first aligned byte of an unaligned buffer can be past its start.
constexpr size_t kScratchSlack = kScratchAlign - 1;

// One tokenize call's working memory: the member of the table's kind is laid out.
struct TokenizeScratch {
  tkz::SpmScratch spm;
  tkz::ByteLevelScratch byte_level;
};

// THE scratch layout (see above). ByteLevel counts the table's special tokens: O(vocab).
void tokenize_layout(Arena* a, const fb::Tokenizer* tok, size_t len, TokenizeScratch* s) {
  if (tok && tok->kind() == fb::TokenizerKind::ByteLevel) {
    tkz::byte_level_scratch_layout(a, tok, len, &s->byte_level);
  } else {
    tkz::spm_scratch_layout(a, len, &s->spm);
  }
}

// Bytes a layout measured or carved by `a` needs from the caller, SIZE_MAX when it overflowed.
size_t scratch_need(const Arena& a) {
  return a.overflowed() || a.used() > SIZE_MAX - kScratchSlack ? SIZE_MAX
                                                               : a.used() + kScratchSlack;
}

}  // namespace

size_t tokenize_scratch_bytes(const fb::Tokenizer* tok, size_t text_len) {
  if (text_len > kMaxTokenizeText) return SIZE_MAX;
  Arena measure(nullptr, 0);
  TokenizeScratch s;
  tokenize_layout(&measure, tok, text_len, &s);
  return scratch_need(measure);
}

Status tokenize(const fb::Tokenizer* tok, uint32_t vocab_size, const char* text, size_t len,
                bool add_bos, int32_t* out, size_t cap, size_t* n_out, void* scratch,
                size_t scratch_size, ErrorSink* err) {
  return tokenize_ex(tok, vocab_size, text, len,
                     kTokenizeParseSpecial | (add_bos ? kTokenizeAddBos : 0u), out, cap, n_out,
                     scratch, scratch_size, err);
}

Status tokenize_ex(const fb::Tokenizer* tok, uint32_t vocab_size, const char* text, size_t len,
                   uint32_t flags, int32_t* out, size_t cap, size_t* n_out, void* scratch,
                   size_t scratch_size, ErrorSink* err) {
  RLM_CHECK(n_out != nullptr, RLM_ERR_INVALID_ARGUMENT, err, "n_out is null");
  *n_out = 0;
  RLM_CHECK(tok != nullptr && tok->pieces() && tok->pieces()->size() == vocab_size &&
                tok->sorted_ids() && tok->sorted_ids()->size() == vocab_size && tok->types() &&
                tok->types()->size() == vocab_size,
            RLM_ERR_MODEL_TOKENIZER, err, "tokenizer tables missing or not verified");
  RLM_CHECK(tok->kind() == fb::TokenizerKind::SentencePiece ||
                tok->kind() == fb::TokenizerKind::ByteLevel,
            RLM_ERR_MODEL_UNSUPPORTED, err, "tokenizer kind %u is not implemented",
            static_cast<unsigned>(tok->kind()));
  RLM_CHECK(text != nullptr || len == 0, RLM_ERR_INVALID_ARGUMENT, err, "text is null");
  RLM_CHECK(out != nullptr || cap == 0, RLM_ERR_INVALID_ARGUMENT, err, "output is null");
  RLM_CHECK(len <= kMaxTokenizeText, RLM_ERR_INVALID_ARGUMENT, err,
            "text of %zu bytes is longer than %zu", len, kMaxTokenizeText);

  // Carve the scratch (measure only, when there is none or less than the alignment slack).
  uint8_t* base = static_cast<uint8_t*>(scratch);
  const size_t pad = (kScratchAlign - (reinterpret_cast<uintptr_t>(base) & (kScratchAlign - 1))) &
                     (kScratchAlign - 1);
  const bool carve = base != nullptr && scratch_size >= pad;
  Arena arena(carve ? base + pad : nullptr, carve ? scratch_size - pad : 0);
  TokenizeScratch s;
  tokenize_layout(&arena, tok, len, &s);
  const size_t need = scratch_need(arena);
  RLM_CHECK(scratch != nullptr && scratch_size >= need, RLM_ERR_BUFFER_TOO_SMALL, err,
            "tokenize needs %zu scratch bytes, got %zu", need, scratch ? scratch_size : 0);

  tkz::TokenOut sink{out, cap, 0};
  if ((flags & kTokenizeAddBos) && tok->bos_id() >= 0 &&
      tok->bos_id() < static_cast<int32_t>(vocab_size)) {
    sink.push(tok->bos_id());
  }
  const int32_t unk = tok->unk_id() < static_cast<int32_t>(vocab_size) ? tok->unk_id() : -1;
  const uint8_t* bytes = reinterpret_cast<const uint8_t*>(text);
  if (tok->kind() == fb::TokenizerKind::ByteLevel) {
    tkz::byte_level_encode(tok, unk, bytes, len, (flags & kTokenizeParseSpecial) != 0,
                           s.byte_level, &sink);
  } else {
    tkz::spm_encode(tok, unk, bytes, len, s.spm, &sink);
  }

  *n_out = sink.count;
  RLM_CHECK(sink.count <= cap, RLM_ERR_CAPACITY, err, "text needs %zu tokens, capacity is %zu",
            sink.count, cap);
  return RLM_OK;
}

}  // namespace ringlm::internal
