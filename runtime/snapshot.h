// Session snapshots (rlm_session_save / rlm_session_restore) and forks (rlm_session_fork).
//
// A snapshot is one position-independent byte block (host byte order, no pointers):
//   Header  magic "RLMSNAP1", version, the sizes, an FNV-1a 64 checksum of every byte after
//           the checksum field, the model's fingerprint, the ring geometry it was taken with,
//           and every count the body's sizes follow from;
//   body    the sampler parameters and RNG, logit bias, the token batch (last sampled token +
//           pending input), the penalty history, stop tokens and strings, the held-back text,
//           the logits row (when readable), then per layer the K and V rows of the *live*
//           positions only (never the whole ring) in position order, and their tokens.
// One function (snapshot_io) serves the size query, save and restore, so they cannot drift.
//
// Restore checks everything that can fail before it writes anything: the checksum (which also
// catches truncation, with the total size in the header), the version, the model fingerprint,
// the KV dtype, the ring geometry (a ring that had wrapped needs the same slots and sinks; one
// that had not needs room for every position) and every budget (pending tokens, penalty window,
// stop strings, logit bias); a failure is a named error and leaves the session unchanged.
// Not part of a snapshot: the speculation drafter and a grammar (the caller's objects) and the
// logprobs array; restore turns a grammar off and ends any speculative pass.
#ifndef RINGLM_RUNTIME_SNAPSHOT_H_
#define RINGLM_RUNTIME_SNAPSHOT_H_

#include <stddef.h>
#include <stdint.h>

#include "session.h"

namespace ringlm::internal {

// A cheap fingerprint of a model: its shape and 64 bytes at 64 offsets spread over the file.
uint64_t model_fingerprint(const ModelImpl& m);

// Bytes rlm_session_save writes for the session as it is now.
size_t snapshot_bytes(const SessionImpl* s);

// Writes the snapshot (cap >= snapshot_bytes, else RLM_ERR_CAPACITY with *n_out = the size).
// Ends a speculative pass first. RLM_ERR_UNSUPPORTED while a grammar is set.
Status snapshot_save(SessionImpl* s, void* out, size_t cap, size_t* n_out);

// Restores a snapshot into `s` (see above); RLM_ERR_SNAPSHOT_CORRUPT or
// RLM_ERR_SNAPSHOT_MISMATCH (or RLM_ERR_CAPACITY for a budget) with the session unchanged.
Status snapshot_restore(SessionImpl* s, const void* in, size_t n);

// Copies the state of `src` into `dst`, a fresh session of the same model and config.
void session_copy_state(SessionImpl* src, SessionImpl* dst);

}  // namespace ringlm::internal

#endif  // RINGLM_RUNTIME_SNAPSHOT_H_
