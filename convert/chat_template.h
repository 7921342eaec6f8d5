// Chat templates of the common families, rendered as segments: literal text (tokenized normally)
// and special-token pieces (looked up by their exact piece, never tokenized from text). This is
// a small renderer for known templates, not a Jinja engine: the model file's template text is
// only used to recognise which one it is.
#ifndef RINGLM_TOOLS_CHAT_TEMPLATE_H_
#define RINGLM_TOOLS_CHAT_TEMPLATE_H_

#include <string>
#include <vector>

enum class ChatFormat { ChatML, Llama3, Gemma, Phi3 };

struct ChatSegment {
  bool special;      // true: `text` is one token's piece, e.g. "<|im_start|>"
  std::string text;
};

// Recognises the template family from its text. false when unknown.
bool chat_format_detect(const std::string& tmpl, ChatFormat* out);
// "chatml", "llama3", "gemma", "phi3" -> format. false when unknown.
bool chat_format_parse(const std::string& name, ChatFormat* out);
const char* chat_format_name(ChatFormat f);

// The piece that ends an assistant turn ("<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>").
const char* chat_end_of_turn(ChatFormat f);

// Whether the format starts a conversation with BOS (Llama 3, Gemma) — added by the caller.
bool chat_wants_bos(ChatFormat f);

// Segments for one user turn followed by the assistant header. `first` is the first turn of the
// conversation (the system prompt goes there); `after_reply` says the previous assistant reply
// ended with the end-of-turn token (already in the sequence), so only the separator after it is
// rendered.
std::vector<ChatSegment> chat_render_turn(ChatFormat f, const std::string& system,
                                          const std::string& user, bool first, bool after_reply);

#endif  // RINGLM_TOOLS_CHAT_TEMPLATE_H_
