#include "convert/chat_specials.h"

#include <vector>

namespace ringlm::internal {
namespace conv {

namespace {

struct Format {
  const char* name;
  std::vector<const char*> specials;  // the end-of-turn token first
  const char* tmpl;
};

const std::vector<Format>& formats() {
  static const std::vector<Format> kFormats = {
      {"chatml",
       {"<|im_end|>", "<|im_start|>", "<|endoftext|>"},
       "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
       "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
       "{{ '<|im_start|>assistant\\n' }}{% endif %}"},
      {"llama3",
       {"<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>", "<|begin_of_text|>"},
       "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
       "'<|end_header_id|>\\n\\n' + message['content'] + '<|eot_id|>' }}{% endfor %}"
       "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
       "{% endif %}"},
      {"gemma",
       {"<end_of_turn>", "<start_of_turn>"},
       "{{ bos_token }}{% for message in messages %}{{ '<start_of_turn>' + message['role'] + '\\n' "
       "+ message['content'] + '<end_of_turn>\\n' }}{% endfor %}{% if add_generation_prompt %}"
       "{{ '<start_of_turn>model\\n' }}{% endif %}"},
      {"phi3",
       {"<|end|>", "<|user|>", "<|assistant|>", "<|system|>"},
       "{% for message in messages %}{{ '<|' + message['role'] + '|>\\n' + message['content'] + "
       "'<|end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}"
       "{% endif %}"},
  };
  return kFormats;
}

}  // namespace

bool add_chat_specials(const std::string& format, ModelData* m, std::string* err) {
  const Format* f = nullptr;
  for (const Format& x : formats()) {
    if (format == x.name) f = &x;
  }
  if (!f) {
    *err = "unknown chat format '" + format + "' (chatml, llama3, gemma, phi3)";
    return false;
  }
  TokenizerData& t = m->tokenizer;
  const size_t n = t.pieces.size();
  if (n < 259 + f->specials.size() + 1) {
    *err = "vocabulary too small for the chat special tokens";
    return false;
  }
  for (size_t i = 0; i < f->specials.size(); ++i) {
    const size_t id = n - 1 - i;
    t.pieces[id] = f->specials[i];
    t.types[id] = fb::TokenType::Control;
    if (!t.scores.empty()) t.scores[id] = 0.0f;
  }
  t.end_ids.push_back(static_cast<int32_t>(n - 1));  // the end-of-turn token
  m->chat_template = f->tmpl;
  return true;
}

}  // namespace conv
}  // namespace ringlm::internal
