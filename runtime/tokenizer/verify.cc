// verify_tokenizer: the structural checks model_open runs once on the tokenizer tables, after
// which encoding and decoding index them without checking (see tokenizer.h).
#include "tokenizer.h"
#include "tokenizer/pieces.h"

namespace ringlm::internal {

using fb::TokenType;
using tkz::compare_piece;

Status verify_tokenizer(const fb::Tokenizer* tok, uint32_t vocab, ErrorSink* err,
                        uint32_t* longest_piece) {
  RLM_CHECK(tok != nullptr, RLM_ERR_MODEL_TOKENIZER, err, "model has no tokenizer");
  RLM_CHECK(vocab > 0 && vocab <= kMaxVocab, RLM_ERR_MODEL_TOKENIZER, err,
            "tokenizer vocab_size %u outside [1, %u]", vocab, kMaxVocab);
  RLM_CHECK(static_cast<uint32_t>(tok->kind()) <=
                static_cast<uint32_t>(fb::TokenizerKind::MAX),
            RLM_ERR_MODEL_TOKENIZER, err, "unknown tokenizer kind %u",
            static_cast<unsigned>(tok->kind()));
  RLM_CHECK(static_cast<uint32_t>(tok->pre_tokenizer()) <=
                static_cast<uint32_t>(fb::PreTokenizer::MAX),
            RLM_ERR_MODEL_TOKENIZER, err, "unknown pre-tokenizer %u",
            static_cast<unsigned>(tok->pre_tokenizer()));
  RLM_CHECK(tok->pieces() && tok->pieces()->size() == vocab, RLM_ERR_MODEL_TOKENIZER, err,
            "tokenizer has %u pieces, vocab_size is %u",
            tok->pieces() ? tok->pieces()->size() : 0u, vocab);
  RLM_CHECK(tok->types() && tok->types()->size() == vocab, RLM_ERR_MODEL_TOKENIZER, err,
            "tokenizer has %u token types, vocab_size is %u",
            tok->types() ? tok->types()->size() : 0u, vocab);
  RLM_CHECK(!tok->scores() || tok->scores()->size() == 0 || tok->scores()->size() == vocab,
            RLM_ERR_MODEL_TOKENIZER, err, "tokenizer has %u scores, vocab_size is %u",
            tok->scores()->size(), vocab);
  RLM_CHECK(tok->sorted_ids() && tok->sorted_ids()->size() == vocab, RLM_ERR_MODEL_TOKENIZER,
            err, "tokenizer has %u sorted ids, vocab_size is %u",
            tok->sorted_ids() ? tok->sorted_ids()->size() : 0u, vocab);
  const auto* pieces = tok->pieces();
  uint32_t longest = 0;
  for (uint32_t i = 0; i < vocab; ++i) {
    const flatbuffers::String* s = pieces->Get(i);
    RLM_CHECK(s != nullptr, RLM_ERR_MODEL_TOKENIZER, err, "piece %u missing", i);
    RLM_CHECK(s->size() <= kMaxPieceBytes, RLM_ERR_MODEL_TOKENIZER, err,
              "piece %u is %u bytes long, more than the %u a piece may have", i, s->size(),
              kMaxPieceBytes);
    if (s->size() > longest) longest = s->size();
    const uint32_t t = static_cast<uint32_t>(tok->types()->Get(i));
    RLM_CHECK(t <= static_cast<uint32_t>(TokenType::MAX), RLM_ERR_MODEL_TOKENIZER, err,
              "token %u has unknown type %u", i, t);
  }
  auto id_ok = [vocab](int32_t id) { return id >= -1 && id < static_cast<int32_t>(vocab); };
  RLM_CHECK(id_ok(tok->bos_id()) && id_ok(tok->eos_id()) && id_ok(tok->unk_id()) &&
                id_ok(tok->pad_id()),
            RLM_ERR_MODEL_TOKENIZER, err, "special token id out of range (bos %d eos %d unk %d pad %d)",
            tok->bos_id(), tok->eos_id(), tok->unk_id(), tok->pad_id());
  if (tok->end_ids()) {
    for (int32_t id : *tok->end_ids()) {
      RLM_CHECK(id >= 0 && id < static_cast<int32_t>(vocab), RLM_ERR_MODEL_TOKENIZER, err,
                "end token id %d out of range", id);
    }
  }
  const auto* sorted = tok->sorted_ids();
  for (uint32_t i = 0; i < vocab; ++i) {
    const uint32_t id = sorted->Get(i);
    RLM_CHECK(id < vocab, RLM_ERR_MODEL_TOKENIZER, err, "sorted id %u at %u out of range", id, i);
    if (i > 0) {
      const flatbuffers::String* a = pieces->Get(sorted->Get(i - 1));
      const flatbuffers::String* b = pieces->Get(id);
      RLM_CHECK(compare_piece(a, reinterpret_cast<const uint8_t*>(b->data()), b->size()) <= 0,
                RLM_ERR_MODEL_TOKENIZER, err, "sorted_ids not ordered by piece bytes at %u", i);
    }
  }
  if (tok->merges()) {
    const auto* merges = tok->merges();
    for (uint32_t i = 0; i < merges->size(); ++i) {
      const fb::Merge* m = merges->Get(i);
      RLM_CHECK(m->left() < vocab && m->right() < vocab && m->result() < vocab,
                RLM_ERR_MODEL_TOKENIZER, err, "merge %u (%u + %u -> %u) id out of range", i,
                m->left(), m->right(), m->result());
      if (i > 0) {
        const fb::Merge* p = merges->Get(i - 1);
        RLM_CHECK(p->left() < m->left() || (p->left() == m->left() && p->right() < m->right()),
                  RLM_ERR_MODEL_TOKENIZER, err,
                  "merges not strictly ordered by (left, right) at %u", i);
      }
    }
  }
  if (longest_piece) *longest_piece = longest;
  return RLM_OK;
}

}  // namespace ringlm::internal
