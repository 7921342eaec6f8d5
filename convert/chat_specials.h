// Chat special tokens and template text for synthetic (random-weight) models, so the chat
// mechanics (template rendering, end-of-turn stops, KV reuse) can be exercised without a
// downloaded checkpoint.
#ifndef RINGLM_TOOLS_CONVERT_CHAT_SPECIALS_H_
#define RINGLM_TOOLS_CONVERT_CHAT_SPECIALS_H_

#include <string>

#include "convert/ir.h"

namespace ringlm::internal {
namespace conv {

// `format` is chatml | llama3 | gemma | phi3. Replaces the last pieces of the vocabulary with
// the format's special tokens (type Control), adds its end-of-turn token to end_ids, and sets a
// representative chat template text. false with *err for an unknown format or a vocabulary too
// small to hold them.
bool add_chat_specials(const std::string& format, ModelData* model, std::string* err);

}  // namespace conv
}  // namespace ringlm::internal

#endif  // RINGLM_TOOLS_CONVERT_CHAT_SPECIALS_H_
