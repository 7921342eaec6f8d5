#include "convert/chat_template.h"

namespace {

ChatSegment S(const char* piece) { return ChatSegment{true, piece}; }
ChatSegment T(const std::string& text) { return ChatSegment{false, text}; }

}  // namespace

bool chat_format_detect(const std::string& t, ChatFormat* out) {
  if (t.find("<|im_start|>") != std::string::npos) {
    *out = ChatFormat::ChatML;
  } else if (t.find("<|start_header_id|>") != std::string::npos) {
    *out = ChatFormat::Llama3;
  } else if (t.find("<start_of_turn>") != std::string::npos) {
    *out = ChatFormat::Gemma;
  } else if (t.find("<|user|>") != std::string::npos && t.find("<|end|>") != std::string::npos) {
    *out = ChatFormat::Phi3;
  } else {
    return false;
  }
  return true;
}

bool chat_format_parse(const std::string& n, ChatFormat* out) {
  if (n == "chatml") *out = ChatFormat::ChatML;
  else if (n == "llama3") *out = ChatFormat::Llama3;
  else if (n == "gemma") *out = ChatFormat::Gemma;
  else if (n == "phi3") *out = ChatFormat::Phi3;
  else return false;
  return true;
}

const char* chat_format_name(ChatFormat f) {
  switch (f) {
    case ChatFormat::ChatML: return "chatml";
    case ChatFormat::Llama3: return "llama3";
    case ChatFormat::Gemma: return "gemma";
    case ChatFormat::Phi3: return "phi3";
  }
  return "?";
}

const char* chat_end_of_turn(ChatFormat f) {
  switch (f) {
    case ChatFormat::ChatML: return "<|im_end|>";
    case ChatFormat::Llama3: return "<|eot_id|>";
    case ChatFormat::Gemma: return "<end_of_turn>";
    case ChatFormat::Phi3: return "<|end|>";
  }
  return "";
}

bool chat_wants_bos(ChatFormat f) { return f == ChatFormat::Llama3 || f == ChatFormat::Gemma; }

std::vector<ChatSegment> chat_render_turn(ChatFormat f, const std::string& system,
                                          const std::string& user, bool first, bool after_reply) {
  std::vector<ChatSegment> out;
  const bool sys = first && !system.empty();
  switch (f) {
    case ChatFormat::ChatML:
      // <|im_start|>role\ncontent<|im_end|>\n ... <|im_start|>assistant\n
      if (after_reply) out.push_back(T("\n"));
      if (sys) {
        out.push_back(S("<|im_start|>"));
        out.push_back(T("system\n" + system));
        out.push_back(S("<|im_end|>"));
        out.push_back(T("\n"));
      }
      out.push_back(S("<|im_start|>"));
      out.push_back(T("user\n" + user));
      out.push_back(S("<|im_end|>"));
      out.push_back(T("\n"));
      out.push_back(S("<|im_start|>"));
      out.push_back(T("assistant\n"));
      break;
    case ChatFormat::Llama3:
      // <|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|>
      if (sys) {
        out.push_back(S("<|start_header_id|>"));
        out.push_back(T("system"));
        out.push_back(S("<|end_header_id|>"));
        out.push_back(T("\n\n" + system));
        out.push_back(S("<|eot_id|>"));
      }
      out.push_back(S("<|start_header_id|>"));
      out.push_back(T("user"));
      out.push_back(S("<|end_header_id|>"));
      out.push_back(T("\n\n" + user));
      out.push_back(S("<|eot_id|>"));
      out.push_back(S("<|start_header_id|>"));
      out.push_back(T("assistant"));
      out.push_back(S("<|end_header_id|>"));
      out.push_back(T("\n\n"));
      break;
    case ChatFormat::Gemma:
      // Gemma has no system role: its template prepends the system text to the first user turn.
      if (after_reply) out.push_back(T("\n"));
      out.push_back(S("<start_of_turn>"));
      out.push_back(T("user\n" + (sys ? system + "\n\n" : std::string()) + user));
      out.push_back(S("<end_of_turn>"));
      out.push_back(T("\n"));
      out.push_back(S("<start_of_turn>"));
      out.push_back(T("model\n"));
      break;
    case ChatFormat::Phi3:
      // <|user|>\ncontent<|end|>\n<|assistant|>\n
      if (after_reply) out.push_back(T("\n"));
      if (sys) {
        out.push_back(S("<|system|>"));
        out.push_back(T("\n" + system));
        out.push_back(S("<|end|>"));
        out.push_back(T("\n"));
      }
      out.push_back(S("<|user|>"));
      out.push_back(T("\n" + user));
      out.push_back(S("<|end|>"));
      out.push_back(T("\n"));
      out.push_back(S("<|assistant|>"));
      out.push_back(T("\n"));
      break;
  }
  return out;
}
