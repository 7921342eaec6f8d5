// ringlm inspect MODEL [--json]: verify a model file and print what it holds.
#include <stdio.h>
#include <string.h>

#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "commands.h"
#include "mapped_file.h"
#include "model.h"
#include "ringlm/ringlm.h"

namespace {

using json = nlohmann::json;
using namespace ringlm::internal;

void usage(FILE* f) {
  fprintf(f,
          "usage: ringlm inspect MODEL [--json]\n"
          "\n"
          "Verifies MODEL exactly as rlm_model_open does and prints its hyperparameters,\n"
          "tokenizer, every tensor and the totals. Exits 1 when verification fails.\n"
          "\n"
          "options:\n"
          "  --json   one JSON object on stdout instead of text\n");
}

const char* or_unknown(const char* s) { return s && *s ? s : "(unknown)"; }

std::string shape_str(const fb::Tensor* t) {
  std::string s = "(";
  if (t->shape()) {
    for (uint32_t i = 0; i < t->shape()->size(); ++i) {
      if (i) s += ", ";
      s += std::to_string(t->shape()->Get(i));
    }
  }
  return s + ")";
}

// Everything the FlatBuffer says, as JSON (used for both output forms). `root` has passed the
// FlatBuffer verifier, so every accessor is safe; semantic checks may have failed.
json describe(const fb::Model* root, size_t file_size, uint64_t header_bytes) {
  json j;
  j["format_version"] = root->format_version();
  j["file_bytes"] = file_size;
  j["header_bytes"] = header_bytes;
  if (const fb::Architecture* a = root->arch()) {
    j["family"] = or_unknown(fb::EnumNameFamily(a->family()));
    j["n_layers"] = a->n_layers();
    j["dim"] = a->dim();
    j["n_heads"] = a->n_heads();
    j["n_kv_heads"] = a->n_kv_heads();
    j["head_dim"] = a->head_dim();
    j["ffn_dim"] = a->ffn_dim();
    j["vocab_size"] = a->vocab_size();
    j["max_context"] = a->max_context();
    j["rope_theta"] = a->rope_theta();
    j["rope_style"] = or_unknown(fb::EnumNameRopeStyle(a->rope_style()));
    j["rope_scaling"] = or_unknown(fb::EnumNameRopeScaling(a->rope_scaling()));
    j["norm_eps"] = a->norm_eps();
    j["tied_embeddings"] = a->tied_embeddings();
    j["activation"] = or_unknown(fb::EnumNameActivation(a->activation()));
  }
  if (const fb::Tokenizer* t = root->tokenizer()) {
    json tj;
    tj["kind"] = or_unknown(fb::EnumNameTokenizerKind(t->kind()));
    tj["vocab"] = t->pieces() ? t->pieces()->size() : 0;
    tj["bos_id"] = t->bos_id();
    tj["eos_id"] = t->eos_id();
    tj["unk_id"] = t->unk_id();
    tj["pad_id"] = t->pad_id();
    json ends = json::array();
    if (t->end_ids())
      for (int32_t id : *t->end_ids()) ends.push_back(id);
    tj["end_ids"] = ends;
    tj["merges"] = t->merges() ? t->merges()->size() : 0;
    tj["scores"] = t->scores() ? t->scores()->size() : 0;
    tj["add_bos"] = t->add_bos();
    tj["add_space_prefix"] = t->add_space_prefix();
    tj["byte_fallback"] = t->byte_fallback();
    tj["pre_tokenizer"] = or_unknown(fb::EnumNamePreTokenizer(t->pre_tokenizer()));
    j["tokenizer"] = tj;
  }
  json tensors = json::array();
  uint64_t weight_bytes = 0;
  json by_dtype = json::object();
  if (root->tensors()) {
    for (const fb::Tensor* t : *root->tensors()) {
      json tj;
      tj["name"] = t->name() ? t->name()->str() : "";
      tj["role"] = or_unknown(fb::EnumNameTensorRole(t->role()));
      tj["layer"] = t->layer();
      json shape = json::array();
      if (t->shape())
        for (uint64_t d : *t->shape()) shape.push_back(d);
      tj["shape"] = shape;
      const std::string dt = or_unknown(fb::EnumNameDType(t->dtype()));
      tj["dtype"] = dt;
      tj["offset"] = t->offset();
      tj["bytes"] = t->size();
      weight_bytes += t->size();
      by_dtype[dt] = by_dtype.value(dt, uint64_t{0}) + t->size();
      tensors.push_back(tj);
    }
  }
  j["tensors"] = tensors;
  j["n_tensors"] = tensors.size();
  j["weight_bytes"] = weight_bytes;
  j["bytes_by_dtype"] = by_dtype;
  if (const fb::GenerationDefaults* g = root->generation()) {
    j["generation"] = {{"temperature", g->temperature()}, {"top_k", g->top_k()},
                       {"top_p", g->top_p()},             {"min_p", g->min_p()},
                       {"repeat_penalty", g->repeat_penalty()}, {"max_tokens", g->max_tokens()}};
  }
  if (root->chat_template()) j["chat_template"] = root->chat_template()->str();
  if (const fb::Provenance* p = root->provenance()) {
    j["provenance"] = {{"source", p->source() ? p->source()->str() : ""},
                       {"converter", p->converter() ? p->converter()->str() : ""},
                       {"created_by", p->created_by() ? p->created_by()->str() : ""}};
  }
  return j;
}

std::string human_bytes(uint64_t b) {
  char buf[64];
  if (b >= (1ull << 30)) snprintf(buf, sizeof buf, "%.2f GiB", b / double(1ull << 30));
  else if (b >= (1ull << 20)) snprintf(buf, sizeof buf, "%.2f MiB", b / double(1ull << 20));
  else if (b >= 1024) snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  else snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(b));
  return buf;
}

void print_text(const json& j, const fb::Model* root) {
  printf("format version %u\n", j.value("format_version", 0u));
  if (j.contains("n_layers")) {
    printf("\narchitecture  %s\n", j["family"].get<std::string>().c_str());
    printf("  n_layers %u  dim %u  n_heads %u  n_kv_heads %u  head_dim %u  ffn_dim %u\n",
           j["n_layers"].get<uint32_t>(), j["dim"].get<uint32_t>(), j["n_heads"].get<uint32_t>(),
           j["n_kv_heads"].get<uint32_t>(), j["head_dim"].get<uint32_t>(),
           j["ffn_dim"].get<uint32_t>());
    printf("  vocab_size %u  max_context %u  tied_embeddings %s  activation %s\n",
           j["vocab_size"].get<uint32_t>(), j["max_context"].get<uint32_t>(),
           j["tied_embeddings"].get<bool>() ? "yes" : "no",
           j["activation"].get<std::string>().c_str());
    printf("  rope %s theta %g (scaling %s)  norm_eps %g\n",
           j["rope_style"].get<std::string>().c_str(), j["rope_theta"].get<double>(),
           j["rope_scaling"].get<std::string>().c_str(), j["norm_eps"].get<double>());
  }
  if (j.contains("tokenizer")) {
    const json& t = j["tokenizer"];
    std::string ends;
    for (const auto& e : t["end_ids"]) ends += (ends.empty() ? "" : ",") + std::to_string(e.get<int>());
    printf("\ntokenizer  %s  vocab %u  merges %u  scores %u  pre-tokenizer %s\n",
           t["kind"].get<std::string>().c_str(), t["vocab"].get<uint32_t>(),
           t["merges"].get<uint32_t>(), t["scores"].get<uint32_t>(),
           t["pre_tokenizer"].get<std::string>().c_str());
    printf("  bos %d  eos %d  unk %d  pad %d  end ids [%s]  add_bos %s  add_space_prefix %s  "
           "byte_fallback %s\n",
           t["bos_id"].get<int>(), t["eos_id"].get<int>(), t["unk_id"].get<int>(),
           t["pad_id"].get<int>(), ends.c_str(), t["add_bos"].get<bool>() ? "yes" : "no",
           t["add_space_prefix"].get<bool>() ? "yes" : "no",
           t["byte_fallback"].get<bool>() ? "yes" : "no");
  }
  if (j.contains("generation")) {
    const json& g = j["generation"];
    printf("\ngeneration defaults  temperature %g  top_k %d  top_p %g  min_p %g  repeat_penalty %g\n",
           g["temperature"].get<double>(), g["top_k"].get<int>(), g["top_p"].get<double>(),
           g["min_p"].get<double>(), g["repeat_penalty"].get<double>());
  }
  if (j.contains("chat_template"))
    printf("chat template: %zu bytes\n", j["chat_template"].get<std::string>().size());
  if (j.contains("provenance")) {
    printf("provenance: source %s, converter %s\n",
           j["provenance"]["source"].get<std::string>().c_str(),
           j["provenance"]["converter"].get<std::string>().c_str());
  }
  printf("\n%4s  %-44s %-15s %5s  %-14s %-4s %12s %12s\n", "#", "name", "role", "layer", "shape",
         "type", "bytes", "offset");
  uint32_t i = 0;
  if (root->tensors()) {
    for (const fb::Tensor* t : *root->tensors()) {
      printf("%4u  %-44s %-15s %5d  %-14s %-4s %12llu %12llu\n", i++,
             t->name() ? t->name()->c_str() : "?", or_unknown(fb::EnumNameTensorRole(t->role())),
             t->layer(), shape_str(t).c_str(), or_unknown(fb::EnumNameDType(t->dtype())),
             static_cast<unsigned long long>(t->size()),
             static_cast<unsigned long long>(t->offset()));
    }
  }
  printf("\ntotals: %u tensors, weights %s (%llu bytes)", j["n_tensors"].get<uint32_t>(),
         human_bytes(j["weight_bytes"].get<uint64_t>()).c_str(),
         static_cast<unsigned long long>(j["weight_bytes"].get<uint64_t>()));
  for (auto it = j["bytes_by_dtype"].begin(); it != j["bytes_by_dtype"].end(); ++it)
    printf(", %s %s", it.key().c_str(), human_bytes(it.value().get<uint64_t>()).c_str());
  printf("; header %s; file %s\n", human_bytes(j["header_bytes"].get<uint64_t>()).c_str(),
         human_bytes(j["file_bytes"].get<uint64_t>()).c_str());
}

}  // namespace

int cmd_inspect(int argc, char** argv) {
  std::string path;
  bool as_json = false;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(argv[i], "--json")) {
      as_json = true;
    } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
      fprintf(stderr, "ringlm inspect: unknown option '%s'\n\n", argv[i]);
      usage(stderr);
      return 2;
    } else if (path.empty()) {
      path = argv[i];
    } else {
      fprintf(stderr, "ringlm inspect: more than one MODEL\n\n");
      usage(stderr);
      return 2;
    }
  }
  if (path.empty()) {
    usage(stderr);
    return 2;
  }
  MappedFile file;
  std::string err;
  if (!file.open(path, &err)) {
    if (as_json) {
      json j = {{"file", path}, {"verified", false}, {"status", "RLM_ERR_INVALID_ARGUMENT"},
                {"error", err}};
      std::cout << j.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
    }
    fprintf(stderr, "ringlm inspect: %s\n", err.c_str());
    return 1;
  }
  // mmap is page aligned, hence 64-byte aligned as rlm_model_open requires.
  rlm_model model;
  const rlm_status st = rlm_model_open(file.data(), file.size(), &model);
  const bool ok = st == RLM_OK;
  const std::string message = ok ? "" : rlm_model_error(&model);

  // On failure, show what the metadata says if at least its FlatBuffer structure is sound.
  const uint8_t* bytes = static_cast<const uint8_t*>(file.data());
  const fb::Model* root = nullptr;
  uint64_t header_bytes = 0;
  if (ok) {
    root = model_impl(&model)->root;
  } else if (file.size() >= 8) {
    const uint64_t fb_size = flatbuffers::ReadScalar<uint32_t>(bytes);
    if (fb_size + 4 <= file.size() && flatbuffers::BufferHasIdentifier(bytes, fb::ModelIdentifier(), true)) {
      flatbuffers::Verifier v(bytes, static_cast<size_t>(fb_size + 4));
      if (fb::VerifySizePrefixedModelBuffer(v)) root = fb::GetSizePrefixedModel(bytes);
    }
  }
  if (root) header_bytes = flatbuffers::ReadScalar<uint32_t>(bytes) + 4ull;

  json j = root ? describe(root, file.size(), header_bytes) : json::object();
  j["file"] = path;
  j["verified"] = ok;
  j["status"] = rlm_status_string(st);
  j["error"] = message;
  if (as_json) {
    std::cout << j.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
  } else {
    printf("%s: %s\n", path.c_str(), human_bytes(file.size()).c_str());
    if (root) print_text(j, root);
    if (ok) printf("\nverification: OK\n");
    else printf("\nverification: FAILED %s: %s\n", rlm_status_string(st), message.c_str());
  }
  if (!ok) {
    fprintf(stderr, "ringlm inspect: %s fails verification: %s: %s\n", path.c_str(),
            rlm_status_string(st), message.c_str());
    return 1;
  }
  return 0;
}
