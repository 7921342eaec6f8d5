// Hugging Face checkpoint directory reader: the families of families.h (Llama / Mistral,
// Qwen2, Qwen3, Gemma 2, Gemma 3, Phi-3), their config.json read by hf_config_arch.
//
// Weights come from model.safetensors (or the shards of model.safetensors.index.json) in
// F32 / F16 / BF16. HF applies RoPE with rotate_half, i.e. it pairs (i, i + head_dim/2): the
// model is marked RopeStyle::Neox and q/k are NOT permuted. Gemma norm weights get their + 1,
// Phi-3's fused qkv_proj / gate_up_proj are split. The tokenizer comes from
// tokenizer.json (BPE), tokenizer_config.json and generation_config.json.
#include <stdint.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "convert/families.h"
#include "convert/file_io.h"
#include "convert/json_config.h"
#include "convert/readers.h"
#include "convert/safetensors.h"
#include "model.h"

namespace ringlm::internal {
namespace conv {
namespace {

using json = nlohmann::json;
using fb::TensorRole;

// Token ids from an int or a list of ints (eos_token_id can be either).
std::vector<int64_t> id_list(const json& v) {
  std::vector<int64_t> ids;
  if (v.is_number_integer()) ids.push_back(v.get<int64_t>());
  else if (v.is_array())
    for (const auto& x : v)
      if (x.is_number_integer()) ids.push_back(x.get<int64_t>());
  return ids;
}

// "content" of a special-token entry given as a string or {"content": ...}.
std::string token_content(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string())
    return v["content"].get<std::string>();
  return "";
}

bool is_byte_piece(const std::string& p) {
  return p.size() == 6 && p.compare(0, 3, "<0x") == 0 && p[5] == '>' &&
         isxdigit(static_cast<unsigned char>(p[3])) && isxdigit(static_cast<unsigned char>(p[4]));
}

// Does the normalizer / pre-tokenizer tree contain a node of `type` (optionally with a check)?
template <typename F>
bool find_node(const json& node, const std::string& type, F&& pred) {
  if (node.is_object()) {
    if (node.contains("type") && node["type"].is_string() && node["type"] == type && pred(node))
      return true;
    for (auto it = node.begin(); it != node.end(); ++it)
      if (find_node(it.value(), type, pred)) return true;
  } else if (node.is_array()) {
    for (const auto& x : node)
      if (find_node(x, type, pred)) return true;
  }
  return false;
}

bool read_tokenizer_json(const std::string& path, TokenizerData* out, std::string* err) {
  json j;
  if (!read_json_object(path, &j, err)) return false;
  if (!j.contains("model") || !j["model"].is_object()) {
    *err = "'" + path + "' has no \"model\"";
    return false;
  }
  const json& model = j["model"];
  const std::string type = model.value("type", std::string("?"));
  if (type != "BPE") {
    *err = "'" + path + "': tokenizer model type '" + type + "' is not supported (only BPE)";
    return false;
  }
  if (!model.contains("vocab") || !model["vocab"].is_object()) {
    *err = "'" + path + "': model.vocab missing";
    return false;
  }
  std::map<std::string, uint32_t> vocab;
  std::map<uint32_t, std::string> by_id;
  auto add_piece = [&](const std::string& piece, const json& idv) {
    if (!idv.is_number_integer() || idv.get<int64_t>() < 0 ||
        idv.get<int64_t>() >= static_cast<int64_t>(kMaxVocab)) {
      *err = "'" + path + "': token '" + piece + "' has an invalid id";
      return false;
    }
    const uint32_t id = static_cast<uint32_t>(idv.get<int64_t>());
    auto it = by_id.find(id);
    if (it != by_id.end() && it->second != piece) {
      *err = "'" + path + "': id " + std::to_string(id) + " is used by '" + it->second +
             "' and '" + piece + "'";
      return false;
    }
    by_id[id] = piece;
    vocab.emplace(piece, id);
    return true;
  };
  for (auto it = model["vocab"].begin(); it != model["vocab"].end(); ++it)
    if (!add_piece(it.key(), it.value())) return false;
  std::vector<std::pair<uint32_t, bool>> added;  // id, special
  if (j.contains("added_tokens") && j["added_tokens"].is_array()) {
    for (const auto& a : j["added_tokens"]) {
      if (!a.is_object() || !a.contains("id") || !a.contains("content") || !a["content"].is_string())
        continue;
      if (!add_piece(a["content"].get<std::string>(), a["id"])) return false;
      added.emplace_back(static_cast<uint32_t>(a["id"].get<int64_t>()), a.value("special", false));
    }
  }
  if (by_id.empty()) {
    *err = "'" + path + "': empty vocabulary";
    return false;
  }
  TokenizerData t;
  const uint32_t n = by_id.rbegin()->first + 1;
  t.pieces.resize(n);
  t.types.assign(n, fb::TokenType::Normal);
  for (uint32_t i = 0; i < n; ++i) {
    auto it = by_id.find(i);
    if (it == by_id.end()) {
      t.pieces[i] = "<unused_" + std::to_string(i) + ">";
      t.types[i] = fb::TokenType::Unused;
    } else {
      t.pieces[i] = it->second;
    }
  }
  t.scores.assign(n, 0.0f);
  const bool byte_level =
      (j.contains("pre_tokenizer") && find_node(j["pre_tokenizer"], "ByteLevel", [](const json&) { return true; })) ||
      (j.contains("decoder") && find_node(j["decoder"], "ByteLevel", [](const json&) { return true; }));
  t.kind = byte_level ? fb::TokenizerKind::ByteLevel : fb::TokenizerKind::SentencePiece;
  t.byte_fallback = model.value("byte_fallback", false);
  if (!byte_level) {
    for (uint32_t i = 0; i < n; ++i)
      if (is_byte_piece(t.pieces[i])) t.types[i] = fb::TokenType::Byte;
  }
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    auto it = vocab.find(model["unk_token"].get<std::string>());
    if (it != vocab.end()) {
      t.unk_id = static_cast<int32_t>(it->second);
      t.types[it->second] = fb::TokenType::Unknown;
    }
  }
  for (const auto& a : added) {
    if (static_cast<int32_t>(a.first) == t.unk_id) continue;
    t.types[a.first] = a.second ? fb::TokenType::Control : fb::TokenType::UserDefined;
  }
  // Merges, in rank order: "a b" strings or ["a", "b"] pairs.
  if (model.contains("merges") && model["merges"].is_array()) {
    const json& merges = model["merges"];
    t.merges.reserve(merges.size());
    for (size_t r = 0; r < merges.size(); ++r) {
      const json& m = merges[r];
      std::vector<std::pair<std::string, std::string>> splits;
      if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        splits.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
      } else if (m.is_string()) {
        const std::string s = m.get<std::string>();
        for (size_t sp = s.find(' '); sp != std::string::npos; sp = s.find(' ', sp + 1))
          splits.emplace_back(s.substr(0, sp), s.substr(sp + 1));
      }
      bool ok = false;
      for (const auto& sp : splits) {
        auto l = vocab.find(sp.first), rr = vocab.find(sp.second), res = vocab.find(sp.first + sp.second);
        if (l == vocab.end() || rr == vocab.end() || res == vocab.end()) continue;
        t.merges.push_back({l->second, rr->second, res->second});
        ok = true;
        break;
      }
      if (!ok) {
        *err = "'" + path + "': merge " + std::to_string(r) + " (" + m.dump() +
               ") does not name two tokens whose concatenation is a token";
        return false;
      }
    }
    dedupe_merges(&t);
  }
  // SentencePiece-style "▁" prefix: a Prepend("▁") normalizer, or a Metaspace pre-tokenizer that
  // prepends.
  t.add_space_prefix = false;
  if (!byte_level) {
    if (j.contains("normalizer") &&
        find_node(j["normalizer"], "Prepend", [](const json& n) {
          return n.contains("prepend") && n["prepend"] == "\xe2\x96\x81";
        }))
      t.add_space_prefix = true;
    if (j.contains("pre_tokenizer") &&
        find_node(j["pre_tokenizer"], "Metaspace", [](const json& n) {
          if (n.contains("prepend_scheme") && n["prepend_scheme"].is_string())
            return n["prepend_scheme"] != "never";
          return n.value("add_prefix_space", true);
        }))
      t.add_space_prefix = true;
  } else {
    // Byte-level pre-tokenizer from its regex (Split + ByteLevel(use_regex: false)), or
    // Digits(individual_digits) + ByteLevel (StarCoder / SmolLM), else GPT-2's (ByteLevel's own).
    t.pre_tokenizer = fb::PreTokenizer::Gpt2;
    if (j.contains("pre_tokenizer")) {
      const std::string pre = j["pre_tokenizer"].dump();
      if (pre.find("\\\\p{N}{1,3}") != std::string::npos) t.pre_tokenizer = fb::PreTokenizer::Llama3;
      else if (pre.find("\\\\p{N}|") != std::string::npos) t.pre_tokenizer = fb::PreTokenizer::Qwen2;
      else if (find_node(j["pre_tokenizer"], "Digits", [](const json& n) {
                 return n.value("individual_digits", false);
               }))
        t.pre_tokenizer = fb::PreTokenizer::StarCoder;
    }
  }
  // BOS from the post-processor template (a special token first in "single").
  t.add_bos = !byte_level;
  if (j.contains("post_processor") && j["post_processor"].is_object()) {
    const json& pp = j["post_processor"];
    // Llama 3 nests it: Sequence [ByteLevel, TemplateProcessing].
    const json* tp = nullptr;
    if (pp.value("type", std::string()) == "TemplateProcessing") {
      tp = &pp;
    } else if (pp.contains("processors") && pp["processors"].is_array()) {
      for (const json& p : pp["processors"])
        if (p.is_object() && p.value("type", std::string()) == "TemplateProcessing") tp = &p;
    }
    if (tp && tp->contains("single") && (*tp)["single"].is_array() && !(*tp)["single"].empty()) {
      const json& first = (*tp)["single"][0];
      t.add_bos = first.contains("SpecialToken");
      if (t.add_bos && first["SpecialToken"].is_object() && first["SpecialToken"].contains("id") &&
          first["SpecialToken"]["id"].is_string()) {
        auto it = vocab.find(first["SpecialToken"]["id"].get<std::string>());
        if (it != vocab.end()) t.bos_id = static_cast<int32_t>(it->second);
      }
    }
  }
  *out = std::move(t);
  return true;
}

int32_t piece_id(const TokenizerData& t, const std::string& piece) {
  if (piece.empty()) return -1;
  for (size_t i = 0; i < t.pieces.size(); ++i)
    if (t.pieces[i] == piece) return static_cast<int32_t>(i);
  return -1;
}

bool read_hf_impl(const std::string& path_in, ModelData* out, std::string* err);

// JSON documents are untrusted input: a value of an unexpected type makes nlohmann::json throw
// (type_error, out_of_range). Every entry point turns that into an error message naming the file
// set, so `ringlm convert` reports it instead of terminating.
template <typename F>
bool json_guarded(const std::string& what, std::string* err, F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    *err = what + ": unexpected JSON content: " + e.what();
    return false;
  }
}

}  // namespace

bool read_hf(const std::string& path, ModelData* out, std::string* err) {
  return json_guarded("'" + path + "'", err, [&] { return read_hf_impl(path, out, err); });
}

namespace {

bool read_hf_impl(const std::string& path_in, ModelData* out, std::string* err) {
  std::string dir = path_in;
  if (!is_directory(dir)) {  // allow pointing at a file inside the directory
    size_t slash = dir.find_last_of('/');
    dir = slash == std::string::npos ? "." : dir.substr(0, slash);
  }
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  json cfg;
  if (!read_json_object(dir + "/config.json", &cfg, err)) return false;
  ModelData m;
  m.source = dir;
  auto& a = m.arch;
  if (!hf_config_arch(cfg, &a, err)) {
    *err = "'" + dir + "/config.json': " + *err;
    return false;
  }
  // Bounded before the per-layer tensor list is built from it (a crafted count of 2^28 layers
  // would allocate gigabytes; same class as fuzz_gguf's huge block_count).
  if (a.n_layers > kMaxLayers) {
    *err = "'" + dir + "/config.json': num_hidden_layers " + std::to_string(a.n_layers) +
           " exceeds the runtime's limit of " + std::to_string(kMaxLayers) + " layers";
    return false;
  }
  const bool gemma = a.family == fb::Family::Gemma2 || a.family == fb::Family::Gemma3;

  // Weights.
  std::map<std::string, SafetensorsEntry> entries;
  const std::string single = dir + "/model.safetensors";
  const std::string index = dir + "/model.safetensors.index.json";
  if (file_exists(single)) {
    if (!read_safetensors_header(single, &entries, err)) return false;
  } else if (file_exists(index)) {
    json idx;
    if (!read_json_object(index, &idx, err)) return false;
    if (!idx.contains("weight_map") || !idx["weight_map"].is_object()) {
      *err = "'" + index + "' has no weight_map";
      return false;
    }
    std::set<std::string> shards;
    for (auto it = idx["weight_map"].begin(); it != idx["weight_map"].end(); ++it) {
      if (!it.value().is_string() || it.value().get<std::string>().find('/') != std::string::npos) {
        *err = "'" + index + "': bad shard name for '" + it.key() + "'";
        return false;
      }
      shards.insert(it.value().get<std::string>());
    }
    for (const std::string& s : shards)
      if (!read_safetensors_header(dir + "/" + s, &entries, err)) return false;
  } else {
    *err = "'" + dir + "' has no model.safetensors or model.safetensors.index.json "
           "(PyTorch .bin checkpoints are not supported)";
    return false;
  }
  // Tied checkpoints saved by transformers may keep only one copy of the shared matrix, under
  // either name (safetensors drops the alias): use lm_head.weight as the embedding then.
  const bool has_embed = entries.count("model.embed_tokens.weight") != 0;
  for (const auto& kvp : entries) {
    const std::string& name = kvp.first;
    const SafetensorsEntry& e = kvp.second;
    TensorData t;
    t.name = name;
    if (name.find("rotary_emb.inv_freq") != std::string::npos) continue;  // derived, not a weight
    SourceRole r;
    if (!hf_tensor_role(a.family, name, &r)) {
      *err = "'" + dir + "': tensor '" + name + "' is not part of a supported " +
             family_display_name(a.family) + " model";
      return false;
    }
    if (r.role == TensorRole::Output && a.tied_embeddings) {
      if (has_embed) continue;
      r.role = TensorRole::TokenEmbedding;
      t.name = "model.embed_tokens.weight";  // stored once, as lm_head.weight
    }
    if (r.layer >= static_cast<int32_t>(a.n_layers)) {
      *err = "'" + dir + "': tensor '" + name + "' is beyond num_hidden_layers";
      return false;
    }
    if (e.shape.size() != 1 && e.shape.size() != 2) {
      *err = "'" + dir + "': tensor '" + name + "' has rank " + std::to_string(e.shape.size());
      return false;
    }
    t.shape = e.shape;
    t.source_type = e.dtype;
    SafetensorsEntry copy = e;
    t.load_f32 = [copy, name](std::vector<float>* dst, std::string* er) {
      return load_safetensors_f32(copy, name, dst, er);
    };
    // Gemma RMSNorm scales by (1 + w): the model file stores 1 + w (float32).
    if (gemma && r.norm) add_one_on_load(&t);
    if (!add_source_tensor(a, r, std::move(t), &m.tensors, err)) {
      *err = "'" + dir + "': " + *err;
      return false;
    }
  }
  // Model order: embedding, the layers, then the output norm and head.
  auto order = [](const TensorData& t) {
    return t.role == TensorRole::TokenEmbedding ? -2 : t.layer >= 0 ? t.layer : 0x7fffffff;
  };
  std::stable_sort(m.tensors.begin(), m.tensors.end(), [&](const TensorData& x, const TensorData& y) {
    return order(x) != order(y) ? order(x) < order(y) : x.role < y.role;
  });
  if (!a.tied_embeddings &&
      std::none_of(m.tensors.begin(), m.tensors.end(),
                   [](const TensorData& t) { return t.role == TensorRole::Output; })) {
    *err = "'" + dir + "': tie_word_embeddings is false but lm_head.weight is missing";
    return false;
  }
  if (!check_family_tensors(m, hf_tensor_name, err)) {
    *err = "'" + dir + "': " + *err;
    return false;
  }

  // Tokenizer.
  if (!read_tokenizer_json(dir + "/tokenizer.json", &m.tokenizer, err)) return false;
  TokenizerData& tok = m.tokenizer;
  if (tok.pieces.size() > a.vocab_size) {
    *err = "'" + dir + "/tokenizer.json' has " + std::to_string(tok.pieces.size()) +
           " tokens, more than vocab_size " + std::to_string(a.vocab_size);
    return false;
  }
  while (tok.pieces.size() < a.vocab_size) {
    tok.pieces.push_back("<unused_" + std::to_string(tok.pieces.size()) + ">");
    tok.types.push_back(fb::TokenType::Unused);
    tok.scores.push_back(0.0f);
  }
  const int64_t vocab = a.vocab_size;
  auto valid = [vocab](int64_t id) { return id >= 0 && id < vocab; };
  // Special ids: tokenizer_config.json names, then config.json ids.
  if (cfg.contains("bos_token_id")) {
    auto ids = id_list(cfg["bos_token_id"]);
    if (!ids.empty() && valid(ids[0])) tok.bos_id = static_cast<int32_t>(ids[0]);
  }
  std::vector<int64_t> eos_ids;
  if (cfg.contains("eos_token_id")) eos_ids = id_list(cfg["eos_token_id"]);
  json tc;
  const std::string tc_path = dir + "/tokenizer_config.json";
  if (file_exists(tc_path)) {
    if (!read_json_object(tc_path, &tc, err)) return false;
    if (tc.contains("add_bos_token") && tc["add_bos_token"].is_boolean())
      tok.add_bos = tc["add_bos_token"].get<bool>();
    if (tc.contains("bos_token")) {
      int32_t id = piece_id(tok, token_content(tc["bos_token"]));
      if (id >= 0) tok.bos_id = id;
    }
    if (tc.contains("eos_token")) {
      int32_t id = piece_id(tok, token_content(tc["eos_token"]));
      if (id >= 0) eos_ids.insert(eos_ids.begin(), id);
    }
    if (tc.contains("pad_token")) tok.pad_id = piece_id(tok, token_content(tc["pad_token"]));
    if (tc.contains("chat_template")) {
      const json& ct = tc["chat_template"];
      if (ct.is_string()) {
        m.chat_template = ct.get<std::string>();
      } else if (ct.is_array()) {  // [{"name": ..., "template": ...}]: prefer "default"
        for (const auto& e : ct) {
          if (!e.is_object() || !e.contains("template") || !e["template"].is_string()) continue;
          if (m.chat_template.empty() || e.value("name", std::string()) == "default")
            m.chat_template = e["template"].get<std::string>();
        }
      }
    }
  }
  if (m.chat_template.empty() && file_exists(dir + "/chat_template.jinja")) {
    if (!read_text_file(dir + "/chat_template.jinja", &m.chat_template, err)) return false;
  }
  json gc;
  const std::string gc_path = dir + "/generation_config.json";
  if (file_exists(gc_path)) {
    if (!read_json_object(gc_path, &gc, err)) return false;
    if (gc.contains("eos_token_id")) {
      for (int64_t id : id_list(gc["eos_token_id"])) eos_ids.push_back(id);
    }
    if (gc.contains("bos_token_id") && tok.bos_id < 0) {
      auto ids = id_list(gc["bos_token_id"]);
      if (!ids.empty() && valid(ids[0])) tok.bos_id = static_cast<int32_t>(ids[0]);
    }
    GenerationData& g = m.generation;
    if (gc.contains("temperature") && gc["temperature"].is_number()) {
      g.temperature = gc["temperature"].get<float>();
      g.present = true;
    }
    if (gc.contains("top_k") && gc["top_k"].is_number_integer()) {
      g.top_k = gc["top_k"].get<int32_t>();
      g.present = true;
    }
    if (gc.contains("top_p") && gc["top_p"].is_number()) {
      g.top_p = gc["top_p"].get<float>();
      g.present = true;
    }
    if (gc.contains("min_p") && gc["min_p"].is_number()) {
      g.min_p = gc["min_p"].get<float>();
      g.present = true;
    }
    if (gc.contains("repetition_penalty") && gc["repetition_penalty"].is_number()) {
      g.repeat_penalty = gc["repetition_penalty"].get<float>();
      g.present = true;
    }
  }
  for (int64_t id : eos_ids) {
    if (!valid(id)) {
      *err = "'" + dir + "': eos token id " + std::to_string(id) + " is out of range";
      return false;
    }
    if (std::find(tok.end_ids.begin(), tok.end_ids.end(), id) == tok.end_ids.end())
      tok.end_ids.push_back(static_cast<int32_t>(id));
  }
  tok.eos_id = tok.end_ids.empty() ? -1 : tok.end_ids[0];
  *out = std::move(m);
  return true;
}

}  // namespace

bool read_hf_tokenizer(const std::string& path, TokenizerData* out, std::string* err) {
  return json_guarded("'" + path + "'", err,
                      [&] { return read_tokenizer_json(path, out, err); });
}

}  // namespace conv
}  // namespace ringlm::internal
