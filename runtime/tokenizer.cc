#include "tokenizer.h"

#include <string.h>

#include "model.h"

namespace ringlm {

Status verify_tokenizer(const fb::Tokenizer* tok, uint32_t vocab, ErrorSink* err) {
  RLM_CHECK(tok != nullptr, RLM_ERR_MODEL_TOKENIZER, err, "model has no tokenizer");
  RLM_CHECK(tok->pieces() && tok->pieces()->size() == vocab, RLM_ERR_MODEL_TOKENIZER, err,
            "tokenizer has %u pieces, vocab_size is %u",
            tok->pieces() ? tok->pieces()->size() : 0u, vocab);
  RLM_CHECK(tok->types() && tok->types()->size() == vocab, RLM_ERR_MODEL_TOKENIZER, err,
            "tokenizer types table size differs from vocab_size");
  for (uint32_t i = 0; i < vocab; ++i) {
    const flatbuffers::String* s = tok->pieces()->Get(i);
    RLM_CHECK(s != nullptr && s->size() <= kMaxPieceBytes, RLM_ERR_MODEL_TOKENIZER, err,
              "piece %u missing or longer than %u bytes", i, kMaxPieceBytes);
  }
  auto id_ok = [vocab](int32_t id) { return id >= -1 && id < static_cast<int32_t>(vocab); };
  RLM_CHECK(id_ok(tok->bos_id()) && id_ok(tok->eos_id()) && id_ok(tok->unk_id()) &&
                id_ok(tok->pad_id()),
            RLM_ERR_MODEL_TOKENIZER, err, "special token id out of range");
  if (tok->end_ids()) {
    for (int32_t id : *tok->end_ids()) {
      RLM_CHECK(id >= 0 && id < static_cast<int32_t>(vocab), RLM_ERR_MODEL_TOKENIZER, err,
                "end token id %d out of range", id);
    }
  }
  return RLM_OK;
}

}  // namespace ringlm
