// The ByteLevel pre-tokenizers (Tokenizer.pre_tokenizer): hand-written equivalents of the
// split regexes listed in tokenizer.h (step 2 of ByteLevel encoding). Each is a state machine
// that decodes UTF-8 on the fly with bounded lookahead (one character, or one whitespace run),
// so splitting is O(len) and needs no memory. Classes come from runtime/unicode_tables.inc.
#ifndef RINGLM_RUNTIME_TOKENIZER_PRETOKENIZER_H_
#define RINGLM_RUNTIME_TOKENIZER_PRETOKENIZER_H_

#include <stddef.h>
#include <stdint.h>

#include "model_generated.h"

namespace ringlm::internal {
namespace tkz {

// End of the pre-tokenizer word starting at p in s[0, end), in (p, end] (p < end).
size_t next_word(fb::PreTokenizer pre, const uint8_t* s, size_t p, size_t end);

}  // namespace tkz
}  // namespace ringlm::internal

#endif  // RINGLM_RUNTIME_TOKENIZER_PRETOKENIZER_H_
