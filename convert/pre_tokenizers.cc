// llama.cpp's tokenizer.ggml.pre names (src/llama-vocab.cpp, load_pre: name -> pre type, and
// the BPE tokenizer's regexes per pre type), sorted into the four splits ringlm implements and
// the rest. A name is exact here when llama.cpp gives it the same regex as the ringlm
// pre-tokenizer AND the same merge rule: llama.cpp's Llama 3 group sets ignore_merges (a word
// that is a token is that token), which ringlm's Llama3 pre-tokenizer does; names that use
// Llama 3's regex without ignore_merges (dbrx, smaug-bpe, chatglm-bpe, glm4) are Llama3Merges.
#include "convert/pre_tokenizers.h"

namespace ringlm::internal {
namespace conv {
namespace {

using P = fb::PreTokenizer;

}  // namespace

const std::vector<PreTokenizerName>& llama_cpp_pre_tokenizer_names() {
  static const std::vector<PreTokenizerName> v = {
      // Llama 3's regex (\p{N}{1,3}, case-insensitive contractions), ignore_merges, BOS added.
      {"llama3", true, P::Llama3, nullptr},
      {"llama-v3", true, P::Llama3, nullptr},
      {"llama-bpe", true, P::Llama3, nullptr},
      {"falcon3", true, P::Llama3, nullptr},
      {"falcon-h1", true, P::Llama3, nullptr},
      {"pixtral", true, P::Llama3, nullptr},
      {"midm-2.0", true, P::Llama3, nullptr},
      {"lfm2", true, P::Llama3, nullptr},
      {"jina-v5-nano", true, P::Llama3, nullptr},
      // GPT-2's regex.
      {"gpt-2", true, P::Gpt2, nullptr},
      {"phi-2", true, P::Gpt2, nullptr},
      {"jina-es", true, P::Gpt2, nullptr},
      {"jina-de", true, P::Gpt2, nullptr},
      {"gigachat", true, P::Gpt2, nullptr},
      {"jina-v2-es", true, P::Gpt2, nullptr},
      {"jina-v2-de", true, P::Gpt2, nullptr},
      {"a.x-4.0", true, P::Gpt2, nullptr},
      {"mellum", true, P::Gpt2, nullptr},
      {"modern-bert", true, P::Gpt2, nullptr},
      {"exaone4", true, P::Gpt2, nullptr},
      {"mpt", true, P::Gpt2, nullptr},
      {"olmo", true, P::Gpt2, nullptr},
      {"jais", true, P::Gpt2, nullptr},
      {"trillion", true, P::Gpt2, nullptr},
      {"granite-docling", true, P::Gpt2, nullptr},
      // Llama 3's regex, every word through the merges; ChatGLM / GLM-4 without a BOS token.
      {"dbrx", true, P::Llama3Merges, nullptr},
      {"smaug-bpe", true, P::Llama3Merges, nullptr},
      {"chatglm-bpe", true, P::Llama3Merges, nullptr, true},
      {"glm4", true, P::Llama3Merges, nullptr, true},
      // Qwen2's regex (single digits, case-insensitive contractions).
      {"qwen2", true, P::Qwen2, nullptr},
      {"deepseek-r1-qwen", true, P::Qwen2, nullptr},
      {"kormo", true, P::Qwen2, nullptr},
      {"f2llmv2", true, P::Qwen2, nullptr},
      {"megrez", true, P::Qwen2, nullptr},
      {"stablelm2", true, P::Qwen2, nullptr},
      {"hunyuan", true, P::Qwen2, nullptr},
      {"grok-2", true, P::Qwen2, nullptr},
      // StarCoder's: each digit alone, then GPT-2's regex.
      {"starcoder", true, P::StarCoder, nullptr},
      {"refact", true, P::StarCoder, nullptr},
      {"command-r", true, P::StarCoder, nullptr},
      {"smollm", true, P::StarCoder, nullptr},
      {"codeshell", true, P::StarCoder, nullptr},
      {"exaone", true, P::StarCoder, nullptr},
      {"minerva-7b", true, P::StarCoder, nullptr},
      // Known to llama.cpp, not implemented (yet): its split differs from all four above.
      {"default", false, P::None,
       "llama.cpp's 'default' BPE split (punctuation runs, GPT-2's regex, digit runs, then "
       "groups of three digits)"},

      {"deepseek-llm", false, P::None, "DeepSeek LLM's five regexes (newlines, Latin/Greek/"
                                       "Cyrillic letter runs, ASCII punctuation, CJK, digits)"},
      {"deepseek-coder", false, P::None,
       "DeepSeek Coder's regexes (newlines, \\s?\\p{L}+, \\s?\\p{P}+, CJK runs, single digits)"},
      {"deepseek-v3", false, P::None,
       "DeepSeek V3's regexes (\\p{N}{1,3}, CJK / kana runs, punctuation-led letter runs)"},
      {"hunyuan-dense", false, P::None, "DeepSeek V3's regexes"},
      {"youtu", false, P::None, "its own regexes with ignore_merges"},
      {"minicpm5", false, P::None, "its own split with ignore_merges"},
      {"falcon", false, P::None,
       "Falcon's regexes (punctuation runs, GPT-2's regex, groups of three digits)"},
      {"jais-2", false, P::None, "Jais 2's regex"},
      {"gemma4", false, P::None, "Gemma 4's split with escaped whitespace"},
      {"granite-embed-multi-311m", false, P::None, "Gemma 4's split with escaped whitespace"},
      {"sarvam-moe", false, P::None, "its own split with escaped whitespace"},
      {"jina-v1-en", false, P::None, "GPT-2's regex, plus a separator token ringlm does not add"},
      {"jina-v2-code", false, P::None, "GPT-2's regex, plus a separator token ringlm does not add"},
      {"roberta-bpe", false, P::None, "GPT-2's regex, plus a separator token ringlm does not add"},
      {"whitespace", false, P::None, "a split at whitespace"},
      {"qwen35", false, P::None, "Qwen 3.5's regex"},
      {"poro-chat", false, P::None, "BLOOM's regex ( ?[^(\\s|.,!?…。，、।۔،)]+)"},
      {"bloom", false, P::None, "BLOOM's regex ( ?[^(\\s|.,!?…。，、।۔،)]+)"},
      {"gpt3-finnish", false, P::None, "BLOOM's regex ( ?[^(\\s|.,!?…。，、।۔،)]+)"},
      {"viking", false, P::None, "BLOOM's regex, then single digits"},
      {"tekken", false, P::None, "Tekken's case-split regex with ignore_merges"},
      {"exaone-moe", false, P::None, "EXAONE MoE's regex"},
      {"chameleon", false, P::None, "Chameleon's regexes (sentinel and image tokens, isolated "
                                    "digits and punctuation)"},
      {"gpt-4o", false, P::None, "GPT-4o's case-split regex"},
      {"llama4", false, P::None, "GPT-4o's case-split regex"},
      {"kanana2", false, P::None, "GPT-4o's case-split regex"},
      {"talkie", false, P::None, "GPT-4o's case-split regex"},
      {"minimax-m2", false, P::None, "GPT-4o's case-split regex"},
      {"granite-embed-multi-97m", false, P::None, "its own split with ignore_merges"},
      {"tiny_aya", false, P::None, "Tiny Aya's regex"},
      {"cohere2moe", false, P::None, "Tiny Aya's regex"},
      {"superbpe", false, P::None, "digit runs cut into groups of three from the right"},
      {"bailingmoe", false, P::None, "Ling's regex (single-character newline runs)"},
      {"bailingmoe2", false, P::None, "Ling's regex (single-character newline runs)"},
      {"llada-moe", false, P::None, "Ling's regex (single-character newline runs)"},
      {"seed-coder", false, P::None, "Seed-Coder's regex (newlines apart from punctuation)"},
      {"joyai-llm", false, P::None, "its own regex"},
      {"kimi-k2", false, P::None, "Kimi K2's split (Han runs apart)"},
      {"afmoe", false, P::None, "AFMoE's split (digit groups by length, Asian scripts apart)"},
      {"laguna", false, P::None, "its own regex"},
      {"solar-open", false, P::None, "its own regex"},
      {"mellum2", false, P::None, "its own regex"},
      {"k2-horizon", false, P::None, "its own regex"},
  };
  return v;
}

bool gguf_pre_tokenizer(const std::string& name, fb::PreTokenizer* out, bool* no_bos,
                        std::string* why) {
  *no_bos = false;
  if (name.empty()) {
    *why = "it has no tokenizer.ggml.pre: llama.cpp would then split text with its 'default' "
           "pre-tokenizer, which ringlm does not implement";
    return false;
  }
  for (const PreTokenizerName& p : llama_cpp_pre_tokenizer_names()) {
    if (name != p.name) continue;
    if (p.implemented) {
      *out = p.pre;
      *no_bos = p.no_bos;
      return true;
    }
    *why = "its pre-tokenizer '" + name + "' is not supported: llama.cpp splits text for it by " +
           p.note + ", which ringlm does not implement";
    return false;
  }
  *why = "its pre-tokenizer '" + name +
         "' is not one llama.cpp knows, so how it splits text is unknown";
  return false;
}

}  // namespace conv
}  // namespace ringlm::internal
