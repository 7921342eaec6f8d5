#include "grammar/compiled.h"

#include <string.h>

#include "model.h"
#include "model_generated.h"
#include "tokenizer.h"

namespace ringlm::internal {

namespace {

// The one layout: header, GBNF (its own bound), token table.
Status layout(Arena& a, const ModelImpl& model, const char* text, size_t len, GrammarImpl** out,
              ErrorSink* err) {
  GrammarImpl* gi = a.alloc<GrammarImpl>(1);
  const size_t gbnf = gbnf_bytes(len);
  RLM_CHECK(gbnf != SIZE_MAX, RLM_ERR_GRAMMAR, err, "grammar: %zu bytes of text, over the limit", len);
  void* gmem = a.alloc_bytes(gbnf, 1, kArenaAlignment);
  const uint32_t vocab = model.hp.vocab_size;
  const fb::Tokenizer* tok = model.root->tokenizer();
  TokenTable table;
  RLM_RETURN_IF_ERROR(token_table_layout(a, tok, vocab, &table, err));
  if (a.measuring()) return RLM_OK;
  RLM_CHECK(a.ok() && gi && gmem, RLM_ERR_BUFFER_TOO_SMALL, err,
            "grammar: memory too small (%zu bytes needed)", a.used());
  Arena ga(gmem, gbnf);
  const Grammar* g = nullptr;
  RLM_RETURN_IF_ERROR(gbnf_compile(text, len, ga, &g, err));
  gi->self = gi;
  gi->model = &model;
  gi->g = g;
  gi->tokens = table;
  gi->magic = kGrammarMagic;
  *out = gi;
  return RLM_OK;
}

}  // namespace

size_t grammar_bytes(const ModelImpl& model, size_t len) {
  Arena a(nullptr, 0);
  GrammarImpl* unused = nullptr;
  if (layout(a, model, nullptr, len, &unused, nullptr) != RLM_OK || a.overflowed()) return SIZE_MAX;
  return a.used();
}

Status grammar_compile(const ModelImpl& model, const char* text, size_t len, void* mem, size_t size,
                       GrammarImpl** out, ErrorSink* err) {
  RLM_CHECK(text != nullptr || len == 0, RLM_ERR_INVALID_ARGUMENT, err, "grammar: text is NULL");
  RLM_CHECK(mem != nullptr, RLM_ERR_INVALID_ARGUMENT, err, "grammar: memory is NULL");
  RLM_CHECK(reinterpret_cast<uintptr_t>(mem) % kArenaAlignment == 0, RLM_ERR_MISALIGNED, err,
            "grammar: memory must be %zu-byte aligned", kArenaAlignment);
  const size_t need = grammar_bytes(model, len);
  RLM_CHECK(need != SIZE_MAX, RLM_ERR_GRAMMAR, err, "grammar: %zu bytes of text, over the limit", len);
  RLM_CHECK(size >= need, RLM_ERR_BUFFER_TOO_SMALL, err,
            "grammar: %zu bytes of memory, %zu needed (rlm_grammar_memory)", size, need);
  memset(mem, 0, sizeof(GrammarImpl));  // not a compiled grammar until the end
  Arena a(mem, size);
  return layout(a, model, text, len, out, err);
}

bool grammar_is_compiled(const void* p) {
  const GrammarImpl* gi = static_cast<const GrammarImpl*>(p);
  return gi != nullptr && gi->magic == kGrammarMagic && gi->self == gi;
}

Status grammar_accept_token(const GrammarImpl& gi, Matcher* state, int32_t token, bool* accepted,
                            ErrorSink* err) {
  size_t used = 0;
  return matcher_accept_bytes(state, gi.tokens.data(token), gi.tokens.length(token), accepted,
                              &used, err);
}

}  // namespace ringlm::internal
