// The sessions of `ringlm serve`: N slots carved at start from one block (the size query's bytes,
// rounded up to its alignment, N times), a bounded FIFO of requests waiting for a free slot, and
// a watchdog that cancels the generation of a client that disconnected.
//
// Each slot remembers the tokens of its sequence. A request goes to the idle slot whose cached
// tokens share the longest prefix with its prompt (a follow-up turn of a conversation lands where
// its history is), and only the tokens after that prefix run (see Slot::prepare).
#ifndef RINGLM_TOOLS_SERVE_SLOTS_H_
#define RINGLM_TOOLS_SERVE_SLOTS_H_

#include <stddef.h>
#include <stdint.h>

#include <atomic>
#include <condition_variable>
#include <list>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ringlm/ringlm.h"
#include "serve/openai_api.h"

struct Slot {
  int index = 0;
  rlm_session* s = nullptr;
  // The slot's sequence: prompt and sampled tokens in order. The KV cache holds its first
  // rlm_session_position(s) entries (the last sampled token has not run yet; a cancelled prefill
  // left some unrun).
  std::vector<int32_t> tokens;
  rlm_token_logprob top[kMaxTopLogprobs];  // rlm_session_set_logprobs' array
  std::atomic<bool> client_gone{false};    // set by the watchdog (then the session is cancelled)

  // Rewinds the session to the prefix it shares with `prompt` and queues the rest: all of the
  // cached tokens when the prompt continues them (a follow-up turn), else a multiple of n_batch
  // (see slots.cc); at least the last prompt token always runs, for fresh logits. Returns the
  // tokens reused; -1 with *st (and the session's error) when the feed fails.
  long prepare(const std::vector<int32_t>& prompt, uint32_t n_batch, rlm_status* st);

  // Internal to SlotPool (guarded by its mutex).
  bool busy = false;
  uint64_t last_used = 0;
  int watch_fd = -1;
};

class SlotPool {
 public:
  SlotPool() = default;
  ~SlotPool() { close(); }
  SlotPool(const SlotPool&) = delete;
  SlotPool& operator=(const SlotPool&) = delete;

  // Sizes one session with rlm_session_memory, allocates n_slots of them in one block and
  // initialises them; starts the watchdog. false with *err on failure (nothing left open).
  bool open(const rlm_model* model, const rlm_session_config& config, uint32_t n_slots,
            uint32_t max_queue, std::string* err);
  // Sets the drafter of every slot (prompt lookup; the sessions need max_draft). false with *err.
  bool set_speculation(const rlm_speculation* spec, std::string* err);
  // Stops waiting requests, cancels running generations, releases the sessions, frees the block.
  void close();

  enum class Wait { kOk, kBusy, kGone, kStopping };
  // A free slot for `prompt` (the one sharing the longest cached prefix, else the least recently
  // used). When none is free the request waits in a FIFO of at most max_queue; beyond it: kBusy.
  // A waiting request whose client disconnects (socket `fd`) leaves the queue: kGone. The slot
  // is watched for a disconnect of `fd` until release().
  Slot* acquire(const std::vector<int32_t>& prompt, int fd, Wait* why);
  void release(Slot* slot);
  // Wakes every waiter with kStopping and cancels running generations (server shutdown).
  void stop();
  bool stopping() const { return stopping_; }

  uint32_t size() const { return static_cast<uint32_t>(slots_.size()); }
  uint32_t busy() const;
  uint32_t waiting() const;
  size_t session_bytes() const { return stride_; }
  size_t block_bytes() const { return block_bytes_; }

 private:
  void watchdog();

  std::vector<Slot*> slots_;
  void* block_ = nullptr;
  size_t block_bytes_ = 0, stride_ = 0;
  uint32_t max_queue_ = 0;
  uint64_t clock_ = 0;
  mutable std::mutex mu_;
  std::condition_variable cv_;     // a slot was released / a waiter left / stop
  std::list<uint64_t> queue_;      // tickets of waiting requests, FIFO
  uint64_t next_ticket_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread watchdog_;
  std::condition_variable watchdog_cv_;
};

#endif  // RINGLM_TOOLS_SERVE_SLOTS_H_
