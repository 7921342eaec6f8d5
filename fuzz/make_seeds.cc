// Writes the seed corpora of every fuzz target into OUT_DIR/<target>/ (run at test time: CTest
// fixture fuzz_seeds; nothing here is committed). Seeds are small files built from random-weight
// models in every family and encoding, and from ../shared when present (stories260K's tok512,
// TinyStories' tokenizer.json, the tokenizer conformance strings, a stories260K model).
//
//   fuzz_make_seeds OUT_DIR
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "convert/convert.h"
#include "convert/readers.h"
#include "fixtures.h"
#include "fuzz_common.h"
#include "model_writers.h"
#include "seed_writers.h"

using namespace ringlm_fuzz;
using json = nlohmann::json;

namespace {

std::string g_out;
int g_count = 0;

void mkdirs(const std::string& p) {
  std::string cur;
  for (size_t i = 0; i <= p.size(); ++i) {
    if (i == p.size() || p[i] == '/') {
      if (!cur.empty()) mkdir(cur.c_str(), 0755);
    }
    if (i < p.size()) cur += p[i];
  }
}

void seed(const std::string& target, const std::string& name, const std::string& data) {
  const std::string dir = g_out + "/" + target;
  mkdirs(dir);
  if (!write_file(dir + "/" + name, data)) {
    fprintf(stderr, "make_seeds: cannot write %s/%s\n", dir.c_str(), name.c_str());
    exit(1);
  }
  ++g_count;
}

// ---- tokenizers ----------------------------------------------------------------------------------

TokenizerData sp_tokenizer() { return ringlm_test::random_model_data({}).tokenizer; }

// GPT-2's bytes_to_unicode as UTF-8 strings.
std::vector<std::string> byte_symbols() {
  std::vector<std::string> out(256);
  int extra = 0;
  for (int b = 0; b < 256; ++b) {
    const bool keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    const uint32_t cp = keep ? static_cast<uint32_t>(b) : 256u + static_cast<uint32_t>(extra++);
    std::string s;
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else {
      s += static_cast<char>(0xC0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
    out[b] = s;
  }
  return out;
}

// A small byte-level BPE: the 256 byte symbols, a few merges, specials.
TokenizerData bpe_tokenizer() {
  TokenizerData t;
  t.kind = fb::TokenizerKind::ByteLevel;
  t.pre_tokenizer = fb::PreTokenizer::Llama3;
  t.byte_fallback = false;
  t.add_space_prefix = false;
  t.add_bos = true;
  const std::vector<std::string> sym = byte_symbols();
  for (int b = 0; b < 256; ++b) {
    t.pieces.push_back(sym[b]);
    t.types.push_back(fb::TokenType::Normal);
  }
  auto id = [&](const std::string& p) {
    for (size_t i = 0; i < t.pieces.size(); ++i)
      if (t.pieces[i] == p) return static_cast<uint32_t>(i);
    t.pieces.push_back(p);
    t.types.push_back(fb::TokenType::Normal);
    return static_cast<uint32_t>(t.pieces.size() - 1);
  };
  const std::string G = sym[' '];
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"t", "h"}, {"th", "e"}, {G, "t"}, {G + "t", "he"}, {"i", "n"}, {G, "a"}, {"o", "n"},
      {"e", "r"}, {G, "o"}, {"in", "g"}, {G, "w"}, {"r", "e"}, {G + "a", "n"}, {"l", "l"}};
  for (const auto& m : merges) {
    const uint32_t l = id(m.first), r = id(m.second), res = id(m.first + m.second);
    t.merges.push_back({l, r, res});
  }
  for (const char* s : {"<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|im_start|>",
                        "<|im_end|>"}) {
    t.pieces.push_back(s);
    t.types.push_back(fb::TokenType::Control);
  }
  t.pieces.push_back("<tool>");
  t.types.push_back(fb::TokenType::UserDefined);
  const int32_t n = static_cast<int32_t>(t.pieces.size());
  t.bos_id = n - 6;
  t.eos_id = n - 5;
  t.end_ids = {n - 5, n - 4};
  ringlm::internal::conv::dedupe_merges(&t);
  return t;
}

json bpe_tokenizer_json(const TokenizerData& t) {
  json vocab = json::object();
  json added = json::array();
  for (size_t i = 0; i < t.pieces.size(); ++i) {
    if (t.types[i] == fb::TokenType::Control || t.types[i] == fb::TokenType::UserDefined) {
      added.push_back({{"id", i}, {"content", t.pieces[i]},
                       {"special", t.types[i] == fb::TokenType::Control}});
    } else {
      vocab[t.pieces[i]] = i;
    }
  }
  json merges = json::array();
  for (const auto& m : t.merges) merges.push_back(t.pieces[m.left] + " " + t.pieces[m.right]);
  json split = {{"type", "Split"},
                {"pattern", {{"Regex", "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
                                       "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
                                       "\\s+(?!\\S)|\\s+"}}},
                {"behavior", "Isolated"}};
  json bl = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}};
  json pre = {{"type", "Sequence"}, {"pretokenizers", json::array({split, bl})}};
  json single = json::array();
  single.push_back({{"SpecialToken", {{"id", "<|begin_of_text|>"}, {"type_id", 0}}}});
  single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
  json tp = {{"type", "TemplateProcessing"}, {"single", single}};
  json post = {{"type", "Sequence"}, {"processors", json::array({json{{"type", "ByteLevel"}}, tp})}};
  json model = {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}, {"byte_fallback", false}};
  json j = json::object();
  j["version"] = "1.0";
  j["added_tokens"] = added;
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = pre;
  j["post_processor"] = post;
  j["decoder"] = {{"type", "ByteLevel"}};
  j["model"] = model;
  return j;
}

// The SentencePiece tokenizer.json of `t` (<unk> <s> </s> special), with a BOS post-processor
// and a decoder, so the reader's handling of both is fuzzed too.
json sp_tokenizer_json(const TokenizerData& t) {
  json j = ringlm_test::sp_tokenizer_json(t.pieces, {0, 1, 2});
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                     {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}}};
  j["decoder"] = {{"type", "Sequence"}, {"decoders", json::array()}};
  return j;
}

// ---- model shapes ----------------------------------------------------------------------------------

ModelData::Arch base_arch(fb::Family f, uint32_t dim, uint32_t heads, uint32_t kv, uint32_t ffn,
                          uint32_t layers) {
  ModelData::Arch a;
  a.family = f;
  a.dim = dim;
  a.n_heads = heads;
  a.n_kv_heads = kv;
  a.head_dim = dim / heads;
  a.ffn_dim = ffn;
  a.n_layers = layers;
  a.max_context = 64;
  a.rope_style = f == fb::Family::Llama ? fb::RopeStyle::Interleaved : fb::RopeStyle::Neox;
  a.tied_embeddings = true;
  switch (f) {
    case fb::Family::Qwen2: a.qkv_bias = true; break;
    case fb::Family::Qwen3: a.qk_norm = true; break;
    case fb::Family::Gemma2:
      a.activation = fb::Activation::GeluTanh;
      a.embedding_scale = std::sqrt(static_cast<float>(dim));
      a.query_pre_attn_scalar = static_cast<float>(a.head_dim);
      a.attn_logit_softcap = 50.0f;
      a.final_logit_softcap = 30.0f;
      a.sliding_window = 8;
      a.layer_is_local.assign(layers, false);
      for (uint32_t l = 0; l < layers; l += 2) a.layer_is_local[l] = true;
      break;
    case fb::Family::Gemma3:
      a.activation = fb::Activation::GeluTanh;
      a.qk_norm = true;
      a.embedding_scale = std::sqrt(static_cast<float>(dim));
      a.query_pre_attn_scalar = static_cast<float>(a.head_dim);
      a.rope_theta = 1e6f;
      a.rope_theta_local = 1e4f;
      a.sliding_window = 8;
      a.layer_is_local.assign(layers, false);
      for (uint32_t l = 0; l + 1 < layers; ++l) a.layer_is_local[l] = (l + 1) % 2 != 0;
      break;
    default: break;
  }
  return a;
}

struct Shape {
  const char* name;
  ModelData::Arch arch;
};

std::vector<Shape> shapes() {
  std::vector<Shape> s;
  s.push_back({"llama", base_arch(fb::Family::Llama, 32, 4, 2, 64, 2)});
  ModelData::Arch untied = base_arch(fb::Family::Llama, 32, 2, 1, 32, 1);
  untied.tied_embeddings = false;
  s.push_back({"llama-untied", untied});
  ModelData::Arch l3 = base_arch(fb::Family::Llama, 32, 4, 4, 64, 1);
  l3.rope_scaling = fb::RopeScaling::Llama3;
  l3.rope_scaling_factor = 8.0f;
  l3.rope_low_freq_factor = 1.0f;
  l3.rope_high_freq_factor = 4.0f;
  l3.rope_original_context = 16;
  s.push_back({"llama3-scaled", l3});
  ModelData::Arch lin = base_arch(fb::Family::Llama, 32, 4, 2, 64, 1);
  lin.rope_scaling = fb::RopeScaling::Linear;
  lin.rope_scaling_factor = 2.0f;
  s.push_back({"llama-linear", lin});
  s.push_back({"qwen2", base_arch(fb::Family::Qwen2, 32, 4, 2, 64, 2)});
  s.push_back({"qwen3", base_arch(fb::Family::Qwen3, 32, 4, 2, 64, 2)});
  s.push_back({"gemma2", base_arch(fb::Family::Gemma2, 32, 4, 2, 64, 2)});
  s.push_back({"gemma3", base_arch(fb::Family::Gemma3, 32, 4, 1, 64, 3)});
  s.push_back({"phi3", base_arch(fb::Family::Phi3, 32, 4, 4, 64, 1)});
  return s;
}

std::string model_bytes(const ModelData& m, fb::DType q) {
  std::vector<uint8_t> bytes;
  std::string err;
  if (!ringlm::internal::conv::build_model_bytes(m, q, &bytes, &err)) {
    fprintf(stderr, "make_seeds: build_model_bytes: %s\n", err.c_str());
    exit(1);
  }
  Aligned a;
  a.assign(bytes.data(), bytes.size());
  rlm_model model;
  if (rlm_model_open(a.data(), a.size(), &model) != RLM_OK) {
    fprintf(stderr, "make_seeds: seed model does not verify: %s\n", rlm_model_error(&model));
    exit(1);
  }
  return std::string(bytes.begin(), bytes.end());
}

const char* kChatTemplate =
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}";

// ---- per target ------------------------------------------------------------------------------------

void model_open_seeds(const TokenizerData& sp, const TokenizerData& bpe, const std::string& shared) {
  const fb::DType qs[10] = {fb::DType::F32, fb::DType::F16, fb::DType::Q8,  fb::DType::Q4,
                            fb::DType::Q4K, fb::DType::Q6K, fb::DType::Q5K, fb::DType::Q5,
                            fb::DType::Q4_1, fb::DType::Q5_1};
  uint32_t k = 0;
  for (const Shape& s : shapes()) {
    for (fb::DType q : qs) {
      ModelData m = random_family_model(s.arch, (k % 2) ? bpe : sp, 100 + k);
      if (k % 3 == 0) m.chat_template = kChatTemplate;
      seed("model_open", std::string(s.name) + "-" + ringlm::internal::conv::dtype_name(q) + ".rlm",
           model_bytes(m, q));
      ++k;
    }
  }
  if (!shared.empty()) {
    ringlm::internal::conv::ConvertOptions o;
    o.source = shared + "/models/stories260K/stories260K.bin";
    o.tokenizer = shared + "/models/stories260K/tok512.bin";
    ModelData m;
    std::string err;
    if (ringlm::internal::conv::load_source(o, &m, &err)) seed("model_open", "stories260K-q4.rlm", model_bytes(m, fb::DType::Q4));
  }
  seed("model_open", "empty", "");
  seed("model_open", "header-only", std::string("\x10\x00\x00\x00RLM1", 8) + std::string(16, '\0'));
}

// fuzz_ggml_quants: [type][rows][cols factor][flags] + blocks. Per type: valid blocks for two
// rows of two blocks, the same with a NaN / an infinite scale in the second block, one truncated
// block, and a row one column off the block size.
void ggml_quants_seeds() {
  const auto& layouts = ringlm_test::ggml_block_layouts();
  const uint32_t n_types = 3 + static_cast<uint32_t>(layouts.size());
  for (uint32_t sel = 0; sel < n_types; ++sel) {
    const ringlm_test::GgmlBlockLayout* l = sel >= 3 ? &layouts[sel - 3] : nullptr;
    const std::string name = l ? l->name : sel == 0 ? "F32" : sel == 1 ? "F16" : "BF16";
    std::string blocks;
    if (l) {
      blocks = ringlm_test::random_ggml_blocks(*l, 4, 50 + sel);
    } else {
      std::vector<float> v(4 * 8);
      for (size_t i = 0; i < v.size(); ++i) v[i] = 0.01f * static_cast<float>(i) - 0.1f;
      blocks = ggml_bytes(v, sel == 0 ? GgufWriter::kF32 : sel == 1 ? GgufWriter::kF16
                                                                     : GgufWriter::kBF16);
    }
    const std::string head = {static_cast<char>(sel), 1, 1, 0};  // 2 rows, 2 blocks per row
    seed("ggml_quants", name + "-ok", head + blocks);
    if (l) {
      for (uint16_t bad : {uint16_t{0x7e00}, uint16_t{0x7c00}}) {
        std::string b = blocks;
        memcpy(&b[l->bytes + l->scale_at[l->n_scales - 1]], &bad, 2);
        seed("ggml_quants", name + (bad == 0x7e00 ? "-nan-scale" : "-inf-scale"), head + b);
      }
      seed("ggml_quants", name + "-truncated", head + blocks.substr(0, blocks.size() - l->bytes / 2));
    }
    seed("ggml_quants", name + "-ragged-row", std::string{static_cast<char>(sel), 0, 0, 1} + blocks);
  }
}

void gguf_seeds(const TokenizerData& sp, const TokenizerData& bpe, const TokenizerData* tok512) {
  // The block types of #18 too (Q4_1, Q5_0, Q5_1, IQ4_NL: 32-value blocks fit these shapes;
  // K-quant rows need 256 columns and fall back to F32 here, fuzz_ggml_quants covers them).
  const uint32_t types[9] = {GgufWriter::kF32, GgufWriter::kF16, GgufWriter::kQ8_0,
                             GgufWriter::kQ4_0, GgufWriter::kBF16, 3, 6, 7, 20};
  const char* tnames[9] = {"f32", "f16", "q8_0", "q4_0", "bf16", "q4_1", "q5_0", "q5_1", "iq4_nl"};
  uint32_t k = 0;
  for (const Shape& s : shapes()) {
    if (s.arch.rope_scaling == fb::RopeScaling::Llama3) continue;  // GGUF carries rope_freqs instead
    for (int t = 0; t < 9; ++t) {
      if (s.arch.family != fb::Family::Llama && t != static_cast<int>(k % 9)) continue;
      const TokenizerData& tok = (tok512 && k % 3 == 0) ? *tok512 : ((k % 2) ? bpe : sp);
      ModelData m = random_family_model(s.arch, tok, 200 + k);
      seed("gguf", std::string(s.name) + "-" + tnames[t] + ".gguf",
           write_gguf(m, types[t], k % 4 == 0 ? kChatTemplate : ""));
      ++k;
    }
  }
  // Vocab-only files (read_gguf_tokenizer's input; read_gguf refuses them).
  for (int i = 0; i < 2; ++i) {
    GgufWriter g;
    g.kv_str("general.architecture", "llama");
    gguf_tokenizer(g, i ? bpe : sp);
    seed("gguf", i ? "vocab-bpe.gguf" : "vocab-spm.gguf", g.finish());
  }
}

json hf_config(const ModelData::Arch& a, uint32_t vocab) {
  const char* types[] = {"llama", "qwen2", "qwen3", "gemma2", "gemma3_text", "phi3"};
  json c = {{"model_type", types[static_cast<int>(a.family)]},
            {"hidden_size", a.dim},
            {"intermediate_size", a.ffn_dim},
            {"num_hidden_layers", a.n_layers},
            {"num_attention_heads", a.n_heads},
            {"num_key_value_heads", a.n_kv_heads},
            {"head_dim", a.head_dim},
            {"vocab_size", vocab},
            {"max_position_embeddings", a.max_context},
            {"rms_norm_eps", 1e-6},
            {"rope_theta", a.rope_theta},
            {"tie_word_embeddings", a.tied_embeddings},
            {"bos_token_id", 1},
            {"eos_token_id", 2}};
  if (a.rope_scaling == fb::RopeScaling::Llama3) {
    c["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", a.rope_scaling_factor},
                         {"low_freq_factor", a.rope_low_freq_factor},
                         {"high_freq_factor", a.rope_high_freq_factor},
                         {"original_max_position_embeddings", a.rope_original_context}};
  } else if (a.rope_scaling == fb::RopeScaling::Linear) {
    c["rope_scaling"] = {{"type", "linear"}, {"factor", a.rope_scaling_factor}};
  }
  if (a.family == fb::Family::Gemma2) {
    c["query_pre_attn_scalar"] = a.head_dim;
    c["attn_logit_softcapping"] = 50.0;
    c["final_logit_softcapping"] = 30.0;
    c["sliding_window"] = a.sliding_window;
    c["hidden_activation"] = "gelu_pytorch_tanh";
  } else if (a.family == fb::Family::Gemma3) {
    c["query_pre_attn_scalar"] = a.head_dim;
    c["sliding_window"] = a.sliding_window;
    c["sliding_window_pattern"] = 2;
    c["rope_local_base_freq"] = 10000.0;
    c["hidden_activation"] = "gelu_pytorch_tanh";
  } else if (a.family == fb::Family::Qwen2) {
    c["attention_bias"] = true;
  }
  return c;
}

void hf_seeds(const TokenizerData& sp, const TokenizerData& bpe, const std::string& shared) {
  std::string tiny_json;
  if (!shared.empty()) read_whole_file(shared + "/models/tinystories-656k/tokenizer.json", &tiny_json);
  TokenizerData tiny;
  std::string err;
  const bool have_tiny = !tiny_json.empty() &&
      ringlm::internal::conv::read_hf_tokenizer(shared + "/models/tinystories-656k/tokenizer.json", &tiny, &err);
  const json gen = {{"bos_token_id", 1}, {"eos_token_id", {2, 3}}, {"temperature", 0.7},
                    {"top_k", 20}, {"top_p", 0.9}};
  const json tcfg = {{"add_bos_token", true}, {"chat_template", kChatTemplate},
                     {"eos_token", "<|im_end|>"}};
  uint32_t k = 0;
  const char* dtypes[3] = {"F32", "F16", "BF16"};
  for (const Shape& s : shapes()) {
    const int which = k % 3;  // 0: small SP json, 1: byte-level json, 2: TinyStories json
    const TokenizerData& tok = which == 1 ? bpe : (which == 2 && have_tiny ? tiny : sp);
    const std::string tj = which == 1 ? bpe_tokenizer_json(bpe).dump()
                                      : (which == 2 && have_tiny ? tiny_json : sp_tokenizer_json(sp).dump());
    ModelData m = random_family_model(s.arch, tok, 300 + k);
    const std::string st = write_safetensors(hf_tensors(m), dtypes[k % 3]);
    const std::string cfg = hf_config(m.arch, m.arch.vocab_size).dump(1);
    seed("hf", std::string(s.name) + ".hf",
         join_sections({cfg, st, tj, tcfg.dump(), gen.dump()}, file_separator()));
    if (k == 0) {
      // Sharded: the index names the shard file.
      json idx = {{"metadata", {{"total_size", st.size()}}}, {"weight_map", json::object()}};
      for (const auto& t : hf_tensors(m)) idx["weight_map"][t.first] = "model-00001-of-00002.safetensors";
      seed("hf", "llama-sharded.hf",
           join_sections({cfg, "", tj, "", "", idx.dump(), st}, file_separator()));
      // Tokenizer only (read_hf_tokenizer runs; read_hf fails on the missing config).
      seed("hf", "tokenizer-only.hf", join_sections({"", "", tj}, file_separator()));
    }
    ++k;
  }
}

void llama2c_seeds(const TokenizerData& sp, const TokenizerData* tok512) {
  const std::string tok = write_llama2c_tokenizer(sp);
  seed("llama2c", "tiny-shared.bin",
       join_sections({write_llama2c(16, 24, 1, 2, 1, static_cast<int32_t>(sp.pieces.size()), 8, true, 1), tok},
                     file_separator()));
  seed("llama2c", "tiny-unshared.bin",
       join_sections({write_llama2c(16, 16, 2, 4, 2, static_cast<int32_t>(sp.pieces.size()), 4, false, 2), tok},
                     file_separator()));
  if (tok512) {
    seed("llama2c", "tok512.bin",
         join_sections({write_llama2c(8, 8, 1, 2, 2, 512, 4, true, 3), write_llama2c_tokenizer(*tok512)},
                       file_separator()));
  }
}

std::vector<std::string> conformance_strings(const std::string& shared) {
  std::vector<std::string> out = {"Hello world", " Hello  world\n\n", "it's 2024!!",
                                  "\xc3\xa9t\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80",
                                  "<|endoftext|>x<|im_start|>", "\xff\xfe\xc3", "   ", ""};
  if (shared.empty()) return out;
  std::string inp;
  if (!read_whole_file(shared + "/tokenizers/vectors/ggml-vocab-llama-spm.gguf.inp", &inp)) return out;
  const std::string sep = "\n__ggml_vocab_test__\n";
  size_t start = 0;
  for (;;) {
    const size_t at = inp.find(sep, start);
    out.push_back(inp.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) break;
    start = at + sep.size();
  }
  return out;
}

void tokenizer_seeds(const std::string& shared) {
  const std::vector<std::string> texts = conformance_strings(shared);
  // fuzz_tokenizer builds up to 11 tables; byte 0 picks one (mod the count).
  for (int table = 0; table < 11; ++table) {
    for (size_t i = 0; i < texts.size(); ++i) {
      std::string in;
      in += static_cast<char>(table);
      in += static_cast<char>((i % 4) | (i % 5 == 0 ? 0xF0 : 0));
      in += texts[i];
      seed("tokenizer", "t" + std::to_string(table) + "-" + std::to_string(i), in);
    }
  }
}

void tokenizer_files_seeds(const TokenizerData& sp, const TokenizerData& bpe, const std::string& shared) {
  auto with_kind = [](uint8_t kind, uint32_t vocab, const std::string& body) {
    std::string s;
    s += static_cast<char>(kind);
    s += static_cast<char>(vocab & 0xFF);
    s += static_cast<char>((vocab >> 8) & 0xFF);
    return s + body;
  };
  // tiktoken: the first ranks of Llama 3's file, or single bytes.
  std::string tk;
  if (!shared.empty()) {
    std::string all;
    if (read_whole_file(shared + "/tokenizers/llama3/tokenizer.model", &all)) {
      size_t lines = 0, at = 0;
      while (lines < 400 && at < all.size()) {
        const size_t nl = all.find('\n', at);
        if (nl == std::string::npos) break;
        at = nl + 1;
        ++lines;
      }
      tk = all.substr(0, at);
    }
  }
  if (tk.empty()) tk = "IQ== 0\nIg== 1\nIw== 2\nIyM= 3\n";
  seed("tokenizer_files", "tiktoken", with_kind(0, 0, tk));
  seed("tokenizer_files", "llama2c-sp", with_kind(1, static_cast<uint32_t>(sp.pieces.size()) - 1,
                                                  write_llama2c_tokenizer(sp)));
  for (int i = 0; i < 2; ++i) {
    GgufWriter g;
    gguf_tokenizer(g, i ? bpe : sp);
    seed("tokenizer_files", i ? "gguf-bpe" : "gguf-spm", with_kind(2, 0, g.finish()));
  }
  seed("tokenizer_files", "json-bpe", with_kind(3, 0, bpe_tokenizer_json(bpe).dump()));
  seed("tokenizer_files", "json-sp", with_kind(3, 0, sp_tokenizer_json(sp).dump()));
}

// fuzz_stop input: [n_stops][budget][max_strings][max_piece] then per stop [len][bytes],
// [splits len][splits], text.
std::string stop_input(const std::vector<std::string>& stops, uint8_t budget, uint8_t max_strings,
                       uint8_t max_piece, const std::string& splits, const std::string& text) {
  std::string s;
  s += static_cast<char>(stops.size());
  s += static_cast<char>(budget);
  s += static_cast<char>(max_strings);
  s += static_cast<char>(max_piece - 1);  // range(1, 24): 1 + byte % 24
  for (const std::string& st : stops) {
    s += static_cast<char>(st.size());
    s += st;
  }
  s += static_cast<char>(splits.size());
  s += splits;
  return s + text;
}

void stop_seeds() {
  seed("stop", "the-end", stop_input({"The end", "\n\n"}, 32, 4, 8, "\x03\x05\x01\x07",
                                     "Once upon a time there was a cat. The end. More text"));
  seed("stop", "utf8", stop_input({"\xc3\xa9!", "\xe2\x82\xac"}, 20, 3, 3, "\x01\x02\x03",
                                  "caf\xc3\xa9! costs 5\xe2\x82\xac, \xf0\x9f\x98\x80"));
  seed("stop", "invalid", stop_input({"\xef\xbf\xbd", "x"}, 16, 2, 4, "\x02\x01",
                                     "ab\xff\xc3(\xe2\x82 \xed\xa0\x80 x"));
  seed("stop", "nested", stop_input({"b", "abc", "bc"}, 16, 3, 2, "\x01\x02", "xxabcab"));
  seed("stop", "hold", stop_input({"Hello world"}, 24, 1, 5, "\x04", "Hello worHello Hello world"));
  seed("stop", "none", stop_input({}, 0, 0, 16, "\x10", "no stops here \xe4\xb8\xad"));
}

// fuzz_json_schema input: the schema text itself. One seed per feature of the compiler (and
// tests/data/json_schemas holds larger hand-written ones).
void json_schema_seeds() {
  const std::pair<const char*, const char*> seeds[] = {
      {"any", "{}"},
      {"true", "true"},
      {"object", R"({"type":"object","properties":{"name":{"type":"string","minLength":1,"maxLength":20},)"
                 R"("age":{"type":"integer","minimum":0,"maximum":150},"email":{"type":"string"}},)"
                 R"("required":["name"],"additionalProperties":false})"},
      {"optional", R"({"properties":{"a":{},"b":{"type":"null"},"c":{"type":"boolean"},"d":{}},"required":["c"]})"},
      {"additional", R"({"properties":{"a":{"type":"integer"}},"additionalProperties":{"type":"number"}})"},
      {"array", R"({"type":"array","items":{"type":"object","properties":{"id":{"type":"integer"}},)"
                R"("required":["id"]},"minItems":1,"maxItems":4})"},
      {"tuple", R"({"prefixItems":[{"type":"string"},{"type":"integer","exclusiveMinimum":-3}],"items":{"type":"null"}})"},
      {"enum", R"({"enum":["red","gr\"een",1.5,null,{"k":[true,"\u00e9\ud83d\ude00"]}]})"},
      {"const", R"({"const":"caf\u00e9\n"})"},
      {"anyof", R"({"anyOf":[{"type":"string","format":"date"},{"type":["integer","null"],"maximum":-7}]})"},
      {"oneof-allof", R"({"oneOf":[{"allOf":[{"type":"boolean"}]},{"format":"uuid"}]})"},
      {"ref", R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},)"
              R"("kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v"]}},"$ref":"#/$defs/node"})"},
      {"ref-root", R"({"type":"object","properties":{"next":{"anyOf":[{"$ref":"#"},{"type":"null"}]}}})"},
      {"definitions", R"({"definitions":{"a/b":{"type":"integer","minimum":1}},"$ref":"#/definitions/a~1b"})"},
      {"pattern", R"({"type":"string","pattern":"^[A-Z]{2}-\\d{3,5}(x|yz)?(?:[^a-c\"]|\\.)*\\u00e9+$"})"},
      {"formats", R"({"type":"array","prefixItems":[{"format":"date"},{"format":"time"},{"format":"date-time"},{"format":"uuid"}]})"},
      {"int64", R"({"type":"integer","minimum":-9223372036854775808,"maximum":9223372036854775807})"},
      {"unsupported", R"({"type":"object","properties":{"a":{"patternProperties":{"x":{}}}}})"},
      {"invalid-json", "{\"type\": \"object\",\n \"properties\": {\"a\" 1}}"},
      {"surrogates", R"({"properties":{"\ud83d\ude00":{"const":"\ud800"}}})"},
  };
  for (const auto& s : seeds) seed("json_schema", s.first, s.second);
}

// fuzz_session_api input: model, config bytes, then ops (opcode, args padded to the stride that
// args[0] implies: 1 + args[0] % 24).
struct Program {
  std::string s;
  void op(uint8_t opcode, std::string args) {
    s += static_cast<char>(opcode);
    const size_t stride = 1 + static_cast<uint8_t>(args.empty() ? 0 : args[0]) % 24;
    while (args.size() < stride) args += '\0';
    s += args;
  }
};

std::string session_header(uint8_t model, uint8_t cmode, uint8_t n_ctx, uint8_t n_sink,
                           uint8_t n_batch, uint8_t max_pending, uint8_t text, uint8_t stop_bytes,
                           uint8_t stop_strings, uint8_t stop_tokens, uint8_t penalty,
                           uint8_t bias) {
  std::string s;
  for (uint8_t b : {model, cmode, n_ctx, n_sink, n_batch, max_pending, text, stop_bytes,
                    stop_strings, stop_tokens, penalty, bias})
    s += static_cast<char>(b);
  return s;
}

// A mode byte whose stride (1 + m % 24) is `len` and whose own meaning (m % mod) avoids [0, avoid).
uint8_t mode_for(size_t len, uint32_t mod, uint32_t avoid) {
  for (uint32_t m = 0; m < 256; ++m) {
    if (1 + m % 24 == len && m % mod >= avoid) return static_cast<uint8_t>(m);
  }
  return 0xFE;
}

void session_seeds() {
  for (int model = 0; model < 3; ++model) {
    Program p;
    p.s = session_header(static_cast<uint8_t>(model), model == 2 ? 0x11 : 0x00, 14, 2, 3, 30, 60,
                         20, 3, 2, 30, 4);
    const std::string text = "Once upon a time";
    std::string a;
    a += static_cast<char>(mode_for(2 + text.size(), 16, 2));
    a += static_cast<char>(text.size());
    a += text;
    p.op(0, a);                                          // feed_text
    std::string stop = "e";
    std::string sa;
    sa += static_cast<char>(mode_for(3, 16, 1));
    sa += static_cast<char>(stop.size());
    sa += stop;
    if (model == 1) p.op(8, sa);                          // add_stop_string
    p.op(11, std::string(1, static_cast<char>(10)));     // set_max_tokens
    p.op(3, std::string("\x17\x05", 2));                 // 24 steps
    p.op(13, std::string(1, '\0'));                      // logits
    p.op(5, std::string(1, '\x03'));                     // rewind 3 back
    p.op(4, std::string(1, '\0'));                       // eval
    std::string sp;
    sp += '\x3f';
    for (int i = 0; i < 40; ++i) sp += static_cast<char>(i * 37 + model);
    p.op(7, sp);                                         // set_sampling
    p.op(1, std::string("\x05\x04\x10\x00\x20\x00\xf0\x31\x00\x32\x00", 11));  // feed_tokens
    p.op(3, std::string("\x0f\x07", 2));                 // 16 steps
    p.op(6, std::string(1, '\0'));                       // reset
    p.op(2, std::string(1, '\x05'));                     // step (nothing fed: BAD_STATE)
    seed("session_api", "program-" + std::to_string(model), p.s);
  }
  // Random programs.
  std::mt19937 rng(4242);
  for (int i = 0; i < 24; ++i) {
    std::string s;
    const size_t n = 64 + rng() % 512;
    for (size_t k = 0; k < n; ++k) s += static_cast<char>(rng() & 0xFF);
    s[1] = static_cast<char>(s[1] & 0x1F);  // mostly valid configs
    seed("session_api", "random-" + std::to_string(i), s);
  }
}

// fuzz_speculative input: [model][draft model][mode][max_draft][n_ctx][seed][greedy], then
// (opcode % 12, argument) pairs.
void speculative_seeds() {
  for (int mode = 0; mode < 3; ++mode) {
    std::string s;
    for (uint8_t b : {static_cast<uint8_t>(mode), static_cast<uint8_t>(2 - mode),
                      static_cast<uint8_t>(mode == 2 ? 0x13 : mode + 9), uint8_t{200}, uint8_t{20},
                      uint8_t{7}, static_cast<uint8_t>(mode == 1)})
      s += static_cast<char>(b);
    const uint8_t program[][2] = {{0, 11}, {9, 0},  {3, 19}, {3, 19}, {8, 3},  {0, 5},  {3, 19},
                                  {5, 3},  {2, 0},  {7, 40}, {3, 19}, {10, 0}, {11, 9}, {0, 9},
                                  {3, 19}, {4, 0},  {6, 0},  {0, 11}, {3, 19}, {9, 7},  {3, 19},
                                  {0, 10}, {3, 19}, {3, 19}};
    for (const auto& op : program) {
      s += static_cast<char>(op[0]);
      s += static_cast<char>(op[1]);
    }
    seed("speculative", "program-" + std::to_string(mode), s);
  }
  std::mt19937 rng(1414);
  for (int i = 0; i < 16; ++i) {
    std::string s;
    const size_t n = 16 + rng() % 160;
    for (size_t k = 0; k < n; ++k) s += static_cast<char>(rng() & 0xFF);
    seed("speculative", "random-" + std::to_string(i), s);
  }
}

// fuzz_snapshot input: [mode][n_ctx][kv][steps][seed][offset u16] then the mode's bytes.
void snapshot_seeds() {
  for (int mode = 0; mode < 4; ++mode) {
    for (int wrap = 0; wrap < 2; ++wrap) {
      std::string s;
      for (uint8_t b : {static_cast<uint8_t>(mode), static_cast<uint8_t>(wrap ? 0 : 30),
                        static_cast<uint8_t>(wrap), static_cast<uint8_t>(wrap ? 50 : 12),
                        static_cast<uint8_t>(3 + mode), uint8_t{40}, uint8_t{0}})
        s += static_cast<char>(b);
      // flips / a length / bytes to write / nothing
      const char tail[] = {3, 17, 0, 0, 0, 5, 99, 1, 0, 0, 77, 2, 0, 0, 0, 3, 'x', 'y'};
      s.append(tail, sizeof tail);
      seed("snapshot", "mode" + std::to_string(mode) + (wrap ? "-wrapped" : ""), s);
    }
  }
}

}  // namespace

// fuzz_gbnf input: [budget][split] grammar 0xFF text.
void gbnf_seeds() {
  auto in = [](const std::string& g, const std::string& t) {
    return std::string("\x10\x03", 2) + g + "\xff" + t;
  };
  seed("gbnf", "literal", in("root ::= \"abc\" | \"abd\"", "abd"));
  seed("gbnf", "class", in("root ::= [a-z0-9]+ [^\\n]? \"!\"", "abc9x!"));
  seed("gbnf", "repeat", in("root ::= (\"ab\" | [0-9]){2,5} \"x\"?", "ab12ab"));
  seed("gbnf", "json", in("root ::= value\nvalue ::= obj | arr | str | num\nobj ::= \"{\" (str \":\" value (\",\" str \":\" value)*)? \"}\"\n"
                          "arr ::= \"[\" (value (\",\" value)*)? \"]\"\nstr ::= \"\\\"\" [^\"\\\\]* \"\\\"\"\nnum ::= \"-\"? [0-9]+",
                          "{\"a\":[1,-2,{\"b\":\"c\"}]}"));
  seed("gbnf", "utf8", in("root ::= [\u00e0-\u00ff]+ \"\u65e5\" .", "\xc3\xa9\xc3\xa8\xe6\x97\xa5\xf0\x9f\x98\x80"));
  seed("gbnf", "recursion", in("root ::= p\np ::= \"(\" p \")\" | \"\"", "((()))"));
  seed("gbnf", "optionals", in("root ::= x? x? x? x? x? x? \"!\"\nx ::= \"x\"", "xxx!"));
  seed("gbnf", "comments", in("# c\nroot ::= a # d\n\na ::= \"q\" |\n  \"r\"\n", "r"));
  seed("gbnf", "left-recursion", in("root ::= a\na ::= b? a \"x\"\nb ::= \"y\"", "yx"));
  seed("gbnf", "errors", in("root ::= [z-a] \"\\q\" foo{3,2}", ""));
}

// fuzz_grammar_mask input: [grammar][mode] (GBNF text 0xFF when grammar >= 11), then token
// choices (a byte for the pool, one or two for the token). One walk per built-in grammar and
// vocabulary, and GBNF of its own.
void grammar_mask_seeds() {
  std::mt19937 rng(1515);
  auto choices = [&rng](size_t n) {
    std::string s;
    for (size_t k = 0; k < n; ++k) s += static_cast<char>(rng() & 0xFF);
    return s;
  };
  for (uint8_t g = 0; g < 11; ++g) {
    for (uint8_t mode : {uint8_t{0}, uint8_t{1}, uint8_t{5}}) {  // bytes, rich, rich in 4 KiB
      std::string in;
      in += static_cast<char>(g);
      in += static_cast<char>(mode);
      seed("grammar_mask", "builtin-" + std::to_string(g) + "-mode-" + std::to_string(mode),
           in + choices(128));
    }
  }
  const std::pair<const char*, const char*> own[] = {
      {"negated-non-ascii", "root ::= [^\\u00e0-\\u00ef\\x00-\\x1f]+ \"!\""},
      {"any-repeat", "root ::= .{2,5} (\"\u65e5\u672c\" | [\u00e9\u03b1-\u03c9])*"},
      {"prefixes", "root ::= (\"a\" | \"ab\" | \"abc\" | \"abd\" | \"tru\" | \"true\")+ \"\u2713\"?"},
      {"emoji", "root ::= [\U0001F600-\U0001F64F]{1,3} \"\u00e9\"* [\x70-\u0801]"},
      {"strings", "root ::= \"\\\"\" ([^\"\\\\] | \"\\\\\" [nu\"])* \"\\\"\""},
      {"optional", "root ::= [a-z]+ (\" \" [a-z]+)? \"?\"?"},
      {"nested", "root ::= x\nx ::= \"(\" x* \")\" | [0-9]{1,3}"},
      {"error", "root ::= [z-a] \"\\q\""},
  };
  for (const auto& g : own) {
    for (uint8_t mode : {uint8_t{0}, uint8_t{1}}) {
      std::string in;
      in += '\x80';
      in += static_cast<char>(mode);
      seed("grammar_mask", std::string(g.first) + "-mode-" + std::to_string(mode),
           in + g.second + "\xff" + choices(96));
    }
  }
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: fuzz_make_seeds OUT_DIR\n");
    return 2;
  }
  g_out = argv[1];
  const std::string shared = shared_dir();
  const TokenizerData sp = sp_tokenizer();
  const TokenizerData bpe = bpe_tokenizer();
  TokenizerData tok512;
  std::string err;
  const bool have512 = !shared.empty() &&
      ringlm::internal::conv::read_llama2c_tokenizer(shared + "/models/stories260K/tok512.bin", 512, &tok512, &err);
  model_open_seeds(sp, bpe, shared);
  gguf_seeds(sp, bpe, have512 ? &tok512 : nullptr);
  hf_seeds(sp, bpe, shared);
  llama2c_seeds(sp, have512 ? &tok512 : nullptr);
  tokenizer_seeds(shared);
  tokenizer_files_seeds(sp, bpe, shared);
  stop_seeds();
  json_schema_seeds();
  gbnf_seeds();
  grammar_mask_seeds();
  session_seeds();
  speculative_seeds();
  snapshot_seeds();
  ggml_quants_seeds();
  fprintf(stderr, "make_seeds: %d seeds in %s (shared data: %s)\n", g_count, g_out.c_str(),
          shared.empty() ? "absent" : shared.c_str());
  return 0;
}
