// Header hygiene: ringlm.h and ringlm.hpp as C++17 with -Wall -Wextra -pedantic -Werror (and
// again with -fno-exceptions -fno-rtti). Templates are instantiated so their bodies are checked.
#include "ringlm/ringlm.hpp"
#include "ringlm/ringlm.h"
#include "ringlm/ringlm.hpp"

#include <string>

int ringlm_header_check_cpp(const void* bytes, size_t size);

int ringlm_header_check_cpp(const void* bytes, size_t size) {
  ringlm::Result<ringlm::Model> model = ringlm::Model::open(bytes, size);
  if (!model) return static_cast<int>(model.code()) + model.status_name()[0] + model.message()[0];
  ringlm::Result<ringlm::ModelInfo> info = model->info();
  if (!info || info->vocab_size == 0) return 1;
  ringlm::SessionConfig cfg;
  cfg.n_ctx = 64;
  ringlm::Result<ringlm::MemoryRequirement> need = ringlm::Session::memory_required(*model, cfg);
  if (!need) return 2;
  alignas(64) static unsigned char arena[1 << 16];
  ringlm::Result<ringlm::Session> s = ringlm::Session::create(*model, arena, sizeof arena, cfg);
  if (!s) return 3;
  ringlm::Result<ringlm::Session> owned = ringlm::Session::allocate(*model, cfg);
  ringlm::Session moved = std::move(*owned);
  moved = ringlm::Session();
  ringlm::Status st = s->set_sampling(ringlm::Sampling::greedy());
  st = s->add_stop_string("The end");
  st = s->add_stop_token(2);
  st = s->set_max_tokens(8);
  st = s->set_ignore_eos(false);
  if (!st) return st.name()[0] + st.message()[0];
  std::string out;
  ringlm::Result<rlm_stop_reason> why =
      s->generate("Once", [&out](std::string_view t) { out.append(t.data(), t.size()); });
  why = s->generate("Once", [&out](const ringlm::StepResult& r) {
    out += r.text;
    return r.position < 10;
  });
  why = s->resume([](std::string_view) { return false; });
  const int32_t ids[2] = {1, 2};
  st = s->feed_tokens(ids, 2);
  st = s->feed("<|im_end|>", 0);
  alignas(8) static unsigned char scratch[256];
  int32_t toks[4];
  size_t n_toks = 0;
  st = model->tokenize("a", RLM_TOKENIZE_PARSE_SPECIALS, toks, 4, &n_toks, scratch,
                       model->tokenize_scratch_bytes(1));
  st = s->eval();
  ringlm::Result<ringlm::Session::Logits> logits = s->logits();
  ringlm::Result<ringlm::StepResult> r = s->step();
  if (r && r->done() && logits) out += r->text;
  char buf[16];
  ringlm::Result<std::string_view> piece = model->token_text(1, buf, sizeof buf);
  st = s->rewind(s->position());
  st = s->reset();
  ringlm::AlignedMemory mem(64, 100);
  s->release();
  return static_cast<int>(out.size() + (piece ? piece->size() : 0) + mem.size()) +
         static_cast<int>(why.ok());
}
