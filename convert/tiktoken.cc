#include "convert/tiktoken.h"

#include <stdint.h>

#include <string_view>
#include <unordered_map>
#include <vector>

#include "convert/file_io.h"
#include "model.h"
#include "unicode.h"

namespace ringlm::internal {
namespace conv {
namespace {

constexpr uint32_t kLlama3Ranks = 128000;

int b64_value(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Standard base64 with '=' padding (padding optional at the end).
bool b64_decode(std::string_view in, std::string* out) {
  out->clear();
  uint32_t acc = 0;
  int bits = 0;
  size_t i = 0;
  for (; i < in.size() && in[i] != '='; ++i) {
    const int v = b64_value(static_cast<unsigned char>(in[i]));
    if (v < 0) return false;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  const size_t data_chars = i;
  for (; i < in.size(); ++i)
    if (in[i] != '=') return false;
  if (data_chars % 4 == 1) return false;
  if (in.size() - data_chars > 2) return false;
  if (in.size() % 4 != 0 && in.size() != data_chars) return false;
  return true;
}

std::string to_piece(std::string_view bytes) {
  std::string p;
  p.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) {
    uint8_t u[2];
    const size_t n = gpt2_byte_to_utf8(b, u);
    p.append(reinterpret_cast<const char*>(u), n);
  }
  return p;
}

// Meta's Llama 3.1 / 3.2 special tokens, ids 128000..128255.
std::vector<std::string> llama3_specials() {
  std::vector<std::string> s = {
      "<|begin_of_text|>",           "<|end_of_text|>",
      "<|reserved_special_token_0|>", "<|reserved_special_token_1|>",
      "<|finetune_right_pad_id|>",    "<|reserved_special_token_2|>",
      "<|start_header_id|>",          "<|end_header_id|>",
      "<|eom_id|>",                   "<|eot_id|>",
      "<|python_tag|>"};
  for (int i = 3; s.size() < 256; ++i)
    s.push_back("<|reserved_special_token_" + std::to_string(i) + "|>");
  return s;
}

}  // namespace

bool looks_like_tiktoken(const std::string& head) {
  size_t i = 0;
  while (i < head.size() && (b64_value(static_cast<unsigned char>(head[i])) >= 0 || head[i] == '='))
    ++i;
  if (i == 0 || i >= head.size() || head[i] != ' ') return false;
  size_t j = i + 1;
  while (j < head.size() && head[j] >= '0' && head[j] <= '9') ++j;
  if (j == i + 1) return false;
  return j == head.size() || head[j] == '\n' || head[j] == '\r';
}

bool read_tiktoken(const std::string& path, TokenizerData* out, std::string* err) {
  std::string text;
  if (!read_text_file(path, &text, err)) return false;
  auto fail = [&](size_t line, const std::string& what) {
    *err = "tiktoken file '" + path + "' line " + std::to_string(line) + ": " + what;
    return false;
  };

  // Parse "BASE64 RANK" lines.
  std::vector<std::string> by_rank;  // rank -> bytes
  std::vector<bool> present;
  std::unordered_map<std::string, uint32_t> rank_of;
  size_t line_no = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    std::string_view line(text.data() + pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    const size_t sp = line.find(' ');
    if (sp == std::string_view::npos || sp == 0 || sp + 1 >= line.size())
      return fail(line_no, "expected 'BASE64 RANK'");
    std::string bytes;
    if (!b64_decode(line.substr(0, sp), &bytes) || bytes.empty())
      return fail(line_no, "bad base64 token");
    uint64_t rank = 0;
    for (size_t k = sp + 1; k < line.size(); ++k) {
      const char c = line[k];
      if (c < '0' || c > '9' || rank > kMaxVocab) return fail(line_no, "bad rank");
      rank = rank * 10 + static_cast<uint64_t>(c - '0');
    }
    if (rank >= kMaxVocab) return fail(line_no, "rank " + std::to_string(rank) + " is too large");
    if (to_piece(bytes).size() > kMaxPieceBytes)
      return fail(line_no, "token of " + std::to_string(bytes.size()) +
                               " bytes is too long for a piece (" +
                               std::to_string(kMaxPieceBytes) + " bytes at most)");
    if (rank >= by_rank.size()) {
      by_rank.resize(rank + 1);
      present.resize(rank + 1, false);
    }
    if (present[rank]) return fail(line_no, "rank " + std::to_string(rank) + " appears twice");
    if (!rank_of.emplace(bytes, static_cast<uint32_t>(rank)).second)
      return fail(line_no, "token bytes appear twice");
    present[rank] = true;
    by_rank[rank] = std::move(bytes);
  }
  const uint32_t n_ranks = static_cast<uint32_t>(by_rank.size());
  if (n_ranks == 0) {
    *err = "tiktoken file '" + path + "' has no tokens";
    return false;
  }

  TokenizerData t;
  t.kind = fb::TokenizerKind::ByteLevel;
  t.pre_tokenizer = fb::PreTokenizer::Llama3;
  t.add_bos = true;
  t.add_space_prefix = false;
  t.byte_fallback = false;
  t.pieces.reserve(n_ranks + 256);
  t.types.reserve(n_ranks + 256);
  for (uint32_t r = 0; r < n_ranks; ++r) {
    if (present[r]) {
      t.pieces.push_back(to_piece(by_rank[r]));
      t.types.push_back(fb::TokenType::Normal);
    } else {
      t.pieces.push_back("<unused_" + std::to_string(r) + ">");
      t.types.push_back(fb::TokenType::Unused);
    }
  }

  // Merges: tiktoken's BPE over each token's bytes with the lower ranks; the last merge.
  std::unordered_map<std::string_view, uint32_t> rank_view;
  rank_view.reserve(rank_of.size() * 2);
  for (uint32_t r = 0; r < n_ranks; ++r)
    if (present[r]) rank_view.emplace(std::string_view(by_rank[r]), r);
  // As tiktoken's _byte_pair_merge: part i is [starts[i], starts[i + 1]); pair_rank[i] is the
  // rank of part i joined with part i + 1 (UINT32_MAX: not a token below r). After a merge only
  // the two pairs around it change.
  std::vector<size_t> starts;
  std::vector<uint32_t> pair_rank;
  for (uint32_t r = 0; r < n_ranks; ++r) {
    if (!present[r] || by_rank[r].size() < 2) continue;
    const std::string_view tokv(by_rank[r]);
    auto rank_at = [&](size_t i) -> uint32_t {  // needs parts i and i + 1
      if (i + 2 >= starts.size()) return UINT32_MAX;
      auto it = rank_view.find(tokv.substr(starts[i], starts[i + 2] - starts[i]));
      return it != rank_view.end() && it->second < r ? it->second : UINT32_MAX;
    };
    starts.clear();
    for (size_t k = 0; k <= tokv.size(); ++k) starts.push_back(k);
    pair_rank.assign(starts.size(), UINT32_MAX);
    for (size_t i = 0; i + 2 < starts.size(); ++i) pair_rank[i] = rank_at(i);
    while (starts.size() > 3) {  // more than two parts
      size_t best = SIZE_MAX;
      uint32_t best_rank = UINT32_MAX;
      for (size_t i = 0; i + 2 < starts.size(); ++i) {
        if (pair_rank[i] < best_rank) {
          best_rank = pair_rank[i];
          best = i;
        }
      }
      if (best == SIZE_MAX) break;
      starts.erase(starts.begin() + static_cast<std::ptrdiff_t>(best) + 1);
      pair_rank.erase(pair_rank.begin() + static_cast<std::ptrdiff_t>(best) + 1);
      pair_rank[best] = rank_at(best);
      if (best > 0) pair_rank[best - 1] = rank_at(best - 1);
    }
    if (starts.size() != 3) continue;
    auto l = rank_view.find(tokv.substr(0, starts[1]));
    auto rr = rank_view.find(tokv.substr(starts[1]));
    if (l == rank_view.end() || rr == rank_view.end()) continue;
    t.merges.push_back({l->second, rr->second, r});
  }

  if (n_ranks == kLlama3Ranks) {
    for (const std::string& s : llama3_specials()) {
      t.pieces.push_back(s);
      t.types.push_back(fb::TokenType::Control);
    }
    t.bos_id = 128000;
    t.eos_id = 128001;
    t.end_ids = {128001, 128008, 128009};
  } else {
    t.add_bos = false;
  }
  *out = std::move(t);
  return true;
}

}  // namespace conv
}  // namespace ringlm::internal
