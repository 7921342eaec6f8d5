// tiktoken rank files (Llama 3's tokenizer.model): one "BASE64 RANK" line per token.
#ifndef RINGLM_TOOLS_CONVERT_TIKTOKEN_H_
#define RINGLM_TOOLS_CONVERT_TIKTOKEN_H_

#include <string>

#include "convert/ir.h"

namespace ringlm::internal {
namespace conv {

// Reads a tiktoken rank file into a ByteLevel vocabulary:
//  - token id = rank; a piece is the token's bytes through GPT-2's bytes_to_unicode, so the
//    table is an ordinary byte-level BPE vocab (ranks missing from the file become Unused
//    "<unused_N>" pieces);
//  - merges are derived: for each token of two or more bytes, in rank order, BPE over its bytes
//    with the lower-ranked tokens (tiktoken's own merge loop: lowest-rank adjacent pair first)
//    ends in two parts, which become (left, right) -> token with the token's rank; a token that
//    BPE cannot reach in two parts gets no merge (the runtime's Llama3 whole-word look-up still
//    produces it);
//  - a file of exactly 128000 ranks is Llama 3's: the 256 special tokens 128000..128255 are
//    added with Meta's names (Llama 3.1/3.2: <|begin_of_text|>, <|end_of_text|>,
//    <|reserved_special_token_0|>, <|reserved_special_token_1|>, <|finetune_right_pad_id|>,
//    <|reserved_special_token_2|>, <|start_header_id|>, <|end_header_id|>, <|eom_id|>,
//    <|eot_id|>, <|python_tag|>, then <|reserved_special_token_3..247|>), type Control,
//    bos 128000, eos 128001, end_ids {128001, 128008, 128009}. Other files get no specials.
//  - pre-tokenizer Llama3, add_bos true, no byte fallback, no space prefix.
// False with *err (naming the file and line) on a malformed file.
bool read_tiktoken(const std::string& path, TokenizerData* out, std::string* err);

// Does this text (the start of a file) look like a tiktoken rank file: a first line of
// base64 characters, one space and a decimal rank?
bool looks_like_tiktoken(const std::string& head);

}  // namespace conv
}  // namespace ringlm::internal

#endif  // RINGLM_TOOLS_CONVERT_TIKTOKEN_H_
