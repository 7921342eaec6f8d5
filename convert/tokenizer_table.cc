#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <numeric>

#include "convert/file_io.h"
#include "convert/ir.h"

namespace ringlm::internal {
namespace conv {

flatbuffers::Offset<fb::Tokenizer> build_tokenizer(flatbuffers::FlatBufferBuilder& fbb,
                                                   const TokenizerData& tok) {
  const uint32_t n = static_cast<uint32_t>(tok.pieces.size());
  std::vector<flatbuffers::Offset<flatbuffers::String>> pieces;
  pieces.reserve(n);
  for (const std::string& p : tok.pieces) pieces.push_back(fbb.CreateString(p));
  auto pieces_v = fbb.CreateVector(pieces);

  // Ordered by bytes (memcmp on the common prefix, shorter first), ties by id: the runtime
  // binary-searches this to map a piece back to its id.
  std::vector<uint32_t> sorted(n);
  std::iota(sorted.begin(), sorted.end(), 0u);
  std::stable_sort(sorted.begin(), sorted.end(), [&](uint32_t a, uint32_t b) {
    return tok.pieces[a] < tok.pieces[b];  // std::string compares bytes as unsigned char
  });
  auto sorted_v = fbb.CreateVector(sorted);

  std::vector<fb::Merge> merges;
  merges.reserve(tok.merges.size());
  for (size_t r = 0; r < tok.merges.size(); ++r) {
    const auto& m = tok.merges[r];
    merges.emplace_back(m.left, m.right, m.result, static_cast<uint32_t>(r));
  }
  std::stable_sort(merges.begin(), merges.end(), [](const fb::Merge& a, const fb::Merge& b) {
    return a.left() != b.left() ? a.left() < b.left() : a.right() < b.right();
  });
  auto merges_v = fbb.CreateVectorOfStructs(merges);
  auto scores_v = fbb.CreateVector(tok.scores);
  std::vector<uint8_t> types(tok.types.size());
  for (size_t i = 0; i < types.size(); ++i) types[i] = static_cast<uint8_t>(tok.types[i]);
  auto types_v = fbb.CreateVector(reinterpret_cast<const fb::TokenType*>(types.data()), types.size());
  auto end_v = fbb.CreateVector(tok.end_ids);

  fb::TokenizerBuilder b(fbb);
  b.add_kind(tok.kind);
  b.add_pieces(pieces_v);
  b.add_scores(scores_v);
  b.add_types(types_v);
  b.add_merges(merges_v);
  b.add_sorted_ids(sorted_v);
  b.add_bos_id(tok.bos_id);
  b.add_eos_id(tok.eos_id);
  b.add_unk_id(tok.unk_id);
  b.add_pad_id(tok.pad_id);
  b.add_end_ids(end_v);
  b.add_add_bos(tok.add_bos);
  b.add_add_space_prefix(tok.add_space_prefix);
  b.add_byte_fallback(tok.byte_fallback);
  b.add_pre_tokenizer(tok.pre_tokenizer);
  return b.Finish();
}

std::vector<uint8_t> tokenizer_only_buffer(const TokenizerData& tok) {
  flatbuffers::FlatBufferBuilder fbb(1 << 16);
  fbb.Finish(build_tokenizer(fbb, tok));
  return std::vector<uint8_t>(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
}

static bool is_byte_piece(const std::string& p) {
  if (p.size() != 6 || p.compare(0, 3, "<0x") != 0 || p[5] != '>') return false;
  return isxdigit(static_cast<unsigned char>(p[3])) && isxdigit(static_cast<unsigned char>(p[4]));
}

bool read_llama2c_tokenizer(const std::string& path, uint32_t vocab_size, TokenizerData* out,
                            std::string* err) {
  // Regular files only: std::ifstream would block forever opening a FIFO.
  const int fd = open_regular_file(path, "tokenizer", err);
  if (fd < 0) return false;
  ::close(fd);
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    *err = "cannot open tokenizer '" + path + "'";
    return false;
  }
  int32_t max_len = 0;
  if (!f.read(reinterpret_cast<char*>(&max_len), 4) || max_len <= 0 || max_len > 4096) {
    *err = "tokenizer '" + path + "': bad header";
    return false;
  }
  TokenizerData t;
  t.kind = fb::TokenizerKind::SentencePiece;
  for (uint32_t i = 0; i < vocab_size; ++i) {
    float score;
    int32_t len;
    if (!f.read(reinterpret_cast<char*>(&score), 4) || !f.read(reinterpret_cast<char*>(&len), 4) ||
        len < 0 || len > max_len) {
      *err = "tokenizer '" + path + "': truncated or corrupt at token " + std::to_string(i);
      return false;
    }
    std::string piece(static_cast<size_t>(len), '\0');
    if (len && !f.read(&piece[0], len)) {
      *err = "tokenizer '" + path + "': truncated at token " + std::to_string(i);
      return false;
    }
    // llama2.c's export script turned SentencePiece's "▁" into " " (t.replace('▁', ' '));
    // the model format keeps SentencePiece's own form, so map it back. SentencePiece pieces
    // never contain a raw space, so this is lossless.
    if (!is_byte_piece(piece)) {
      std::string mapped;
      for (char c : piece) {
        if (c == ' ') mapped += "\xE2\x96\x81";
        else mapped += c;
      }
      piece.swap(mapped);
    }
    fb::TokenType type = fb::TokenType::Normal;
    if (piece == "<unk>") type = fb::TokenType::Unknown;
    else if (piece == "<s>" || piece == "</s>" || piece == "\n<s>\n" || piece == "\n</s>\n")
      type = fb::TokenType::Control;
    else if (is_byte_piece(piece)) type = fb::TokenType::Byte;
    t.pieces.push_back(std::move(piece));
    t.scores.push_back(score);
    t.types.push_back(type);
  }
  t.unk_id = vocab_size > 0 ? 0 : -1;
  t.bos_id = vocab_size > 1 ? 1 : -1;
  t.eos_id = vocab_size > 2 ? 2 : -1;
  if (t.eos_id >= 0) t.end_ids.push_back(t.eos_id);
  *out = std::move(t);
  return true;
}

}  // namespace conv
}  // namespace ringlm::internal
