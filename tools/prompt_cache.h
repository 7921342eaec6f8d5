// generate --prompt-cache FILE: a prefilled session saved to a file (rlm_session_save) with the
// prompt tokens it holds, restored when they begin a new prompt.
//
// File: "RLMPC001", u32 token count, u32 0, the tokens (int32), then the snapshot to the end.
// Written to FILE.tmp-<pid> and renamed over FILE, so a reader never sees half a file.
#ifndef RINGLM_TOOLS_PROMPT_CACHE_H_
#define RINGLM_TOOLS_PROMPT_CACHE_H_

#include <stdint.h>

#include <string>
#include <vector>

#include "ringlm/ringlm.h"

// Restores `path` into `s` when its tokens are a prefix of `prompt` (all of them, or all but
// the last: a restore needs a token left to run, or the saved logits of an equal prompt).
// Returns the number of prompt tokens restored (0: the file is absent, unreadable, of another
// prompt, or refused by rlm_session_restore, each reported on stderr but the last two; the session
// is then as before).
uint32_t prompt_cache_restore(const std::string& path, rlm_session* s,
                              const std::vector<int32_t>& prompt);

// Saves `s` (the prompt run: logits ready) with the prompt's tokens; failures are reported on
// stderr and otherwise ignored (the cache is an optimisation).
void prompt_cache_save(const std::string& path, rlm_session* s,
                       const std::vector<int32_t>& prompt);

#endif  // RINGLM_TOOLS_PROMPT_CACHE_H_
