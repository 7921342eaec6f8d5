// --prompt-cache FILE (generate, and chat's first turn): a prefilled session saved to a file
// (rlm_session_save) with the prompt tokens it holds, restored for a new prompt that shares a
// beginning with them.
//
// File: "RLMPC001", u32 token count, u32 0, the tokens (int32), then the snapshot to the end.
// Written to FILE.tmp-<pid> and renamed over FILE, so a reader never sees half a file.
#ifndef RINGLM_TOOLS_PROMPT_CACHE_H_
#define RINGLM_TOOLS_PROMPT_CACHE_H_

#include <stdint.h>

#include <string>
#include <vector>

#include "ringlm/ringlm.h"

// Restores `path` into `s` (a fresh session: position 0, nothing queued) for `prompt` and returns
// how many of the prompt's first tokens the session then holds; the caller queues the rest.
//  - The file's tokens all begin `prompt`: the whole snapshot (all of them, including an equal
//    prompt, whose saved logits let the first token be sampled without running anything).
//  - They share only the first c >= 1 tokens with it (they diverge, or `prompt` is shorter): the
//    snapshot, rewound (rlm_session_rewind) to min(c, prompt.size() - 1), so one token at least
//    is left to run and produce the logits. When that is 0 nothing is restored.
// Returns 0 with the session unchanged when the file is absent, of another prompt (no common
// first token), unreadable or not a regular file, not a prompt cache, truncated, or refused by
// rlm_session_restore (e.g. another model or config); each but the first two is reported on
// stderr. When the rewind is refused (RLM_ERR_REWIND: the saved ring had wrapped) or the
// snapshot disagrees with the file's tokens, it is reported, the session is reset
// (rlm_session_reset) and 0 returned.
// A restore replaces the session's sampling parameters and RNG, stops, max tokens and
// ignore-eos with the saved run's and turns a grammar off (a snapshot carries them; reset keeps
// them): whenever this returns, apply the run's own settings again before stepping.
uint32_t prompt_cache_restore(const std::string& path, rlm_session* s,
                              const std::vector<int32_t>& prompt);

// Saves `s` (the prompt run: logits ready, no grammar set) with the prompt's tokens, replacing
// the file; failures are reported on stderr and otherwise ignored (the cache is an optimisation).
void prompt_cache_save(const std::string& path, rlm_session* s,
                       const std::vector<int32_t>& prompt);

#endif  // RINGLM_TOOLS_PROMPT_CACHE_H_
