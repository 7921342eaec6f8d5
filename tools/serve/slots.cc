#include "serve/slots.h"

#include <stdlib.h>

#include <chrono>

#include "serve/http_server.h"

long Slot::prepare(const std::vector<int32_t>& prompt, uint32_t n_batch, rlm_status* st) {
  size_t common = 0;
  const size_t held = rlm_session_position(s);
  while (common < tokens.size() && common < held && common < prompt.size() &&
         tokens[common] == prompt[common]) {
    ++common;
  }
  // At least the last prompt token runs, so the step has fresh logits.
  if (common >= prompt.size()) common = prompt.size() - 1;
  // A prompt that continues everything the slot holds (a follow-up turn) runs only its new
  // tokens. One that diverges inside the cached sequence (another conversation with the same
  // system prompt, the same prompt again) reuses a multiple of n_batch: the rest then runs in
  // the chunks a fresh session would use, so a repeated prompt gives the same logits, bit for
  // bit, as its first run.
  if (common < held && n_batch > 0) common -= common % n_batch;
  // A rewind fails only once the ring has wrapped, which the server's limits (prompt + completion
  // within the context) rule out; start over if it happens anyway.
  if (rlm_session_rewind(s, static_cast<uint32_t>(common)) != RLM_OK) {
    rlm_session_reset(s);
    common = 0;
  }
  tokens.assign(prompt.begin(), prompt.end());
  *st = rlm_session_feed_tokens(s, prompt.data() + common, prompt.size() - common);
  if (*st != RLM_OK) {
    tokens.resize(common);
    return -1;
  }
  return static_cast<long>(common);
}

bool SlotPool::open(const rlm_model* model, const rlm_session_config& config, uint32_t n_slots,
                    uint32_t max_queue, std::string* err) {
  close();
  size_t bytes = 0, align = 0;
  rlm_status st = rlm_session_memory(model, &config, &bytes, &align);
  if (st != RLM_OK) {
    char msg[512] = "";
    rlm_session_config_check(model, &config, msg, sizeof(msg));
    *err = std::string(rlm_status_string(st)) + ": " + msg;
    return false;
  }
  if (align < 64) align = 64;
  stride_ = (bytes + align - 1) / align * align;
  block_bytes_ = stride_ * n_slots;
  if (posix_memalign(&block_, align, block_bytes_) != 0) {
    block_ = nullptr;
    *err = "cannot allocate " + std::to_string(block_bytes_) + " bytes for " +
           std::to_string(n_slots) + " sessions";
    return false;
  }
  for (uint32_t i = 0; i < n_slots; ++i) {
    Slot* slot = new Slot();
    slot->index = static_cast<int>(i);
    st = rlm_session_init(model, &config, static_cast<char*>(block_) + i * stride_, stride_, &slot->s);
    if (st != RLM_OK) {
      *err = std::string(rlm_status_string(st)) + ": " + rlm_session_error(slot->s);
      delete slot;
      close();
      return false;
    }
    slots_.push_back(slot);
  }
  max_queue_ = max_queue;
  stopping_ = false;
  watchdog_ = std::thread([this] { watchdog(); });
  return true;
}

bool SlotPool::set_speculation(const rlm_speculation* spec, std::string* err) {
  for (Slot* slot : slots_) {
    const rlm_status st = rlm_session_set_speculation(slot->s, spec);
    if (st != RLM_OK) {
      *err = std::string(rlm_status_string(st)) + ": " + rlm_session_error(slot->s);
      return false;
    }
  }
  return true;
}

void SlotPool::stop() {
  std::lock_guard<std::mutex> lock(mu_);
  stopping_ = true;
  for (Slot* slot : slots_) {
    if (slot->busy) rlm_session_cancel(slot->s);
  }
  cv_.notify_all();
  watchdog_cv_.notify_all();
}

void SlotPool::close() {
  if (watchdog_.joinable()) {
    stop();
    watchdog_.join();
  }
  for (Slot* slot : slots_) {
    if (slot->s) rlm_session_release(slot->s);
    delete slot;
  }
  slots_.clear();
  free(block_);
  block_ = nullptr;
  block_bytes_ = stride_ = 0;
}

Slot* SlotPool::acquire(const std::vector<int32_t>& prompt, int fd, Wait* why) {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t ticket = next_ticket_++;
  bool queued = false;
  for (;;) {
    if (stopping_) {
      *why = Wait::kStopping;
      break;
    }
    // Waiting requests are served in arrival order: a request may take a slot when fewer
    // requests are ahead of it in the queue than there are free slots.
    size_t free_n = 0, ahead = 0;
    for (const Slot* slot : slots_) free_n += slot->busy ? 0 : 1;
    if (queued) {
      for (uint64_t t : queue_) {
        if (t == ticket) break;
        ++ahead;
      }
    } else {
      ahead = queue_.size();
    }
    Slot* best = nullptr;
    size_t best_common = 0;
    if (ahead < free_n) {
      for (Slot* slot : slots_) {
        if (slot->busy) continue;
        const size_t held = rlm_session_position(slot->s);
        size_t common = 0;
        while (common < slot->tokens.size() && common < held && common < prompt.size() &&
               slot->tokens[common] == prompt[common]) {
          ++common;
        }
        if (!best || common > best_common ||
            (common == best_common && slot->last_used < best->last_used)) {
          best = slot;
          best_common = common;
        }
      }
    }
    if (best) {
      if (queued) queue_.remove(ticket);
      best->busy = true;
      best->last_used = ++clock_;
      best->watch_fd = fd;
      best->client_gone = false;
      *why = Wait::kOk;
      cv_.notify_all();  // the next in line may find another free slot
      return best;
    }
    if (!queued) {
      if (queue_.size() >= max_queue_) {
        *why = Wait::kBusy;
        return nullptr;
      }
      queue_.push_back(ticket);
      queued = true;
    }
    cv_.wait_for(lock, std::chrono::milliseconds(100));
    if (fd >= 0 && !GuardedServer::peer_alive(fd)) {
      *why = Wait::kGone;
      break;
    }
  }
  if (queued) queue_.remove(ticket);
  cv_.notify_all();
  return nullptr;
}

void SlotPool::release(Slot* slot) {
  std::lock_guard<std::mutex> lock(mu_);
  slot->busy = false;
  slot->watch_fd = -1;
  cv_.notify_all();
}

uint32_t SlotPool::busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  uint32_t n = 0;
  for (const Slot* slot : slots_) n += slot->busy ? 1 : 0;
  return n;
}

uint32_t SlotPool::waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<uint32_t>(queue_.size());
}

// Every 50 ms: a busy slot whose client has gone is cancelled (rlm_session_cancel stops a long
// prefill within a layer; the generation loop sees client_gone and stops stepping). The pool's
// mutex is held, and release() clears watch_fd under it before the request's socket is closed,
// so the socket checked here is the request's own.
void SlotPool::watchdog() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    watchdog_cv_.wait_for(lock, std::chrono::milliseconds(50));
    for (Slot* slot : slots_) {
      if (!slot->busy || slot->watch_fd < 0 || slot->client_gone) continue;
      if (!GuardedServer::peer_alive(slot->watch_fd)) {
        slot->client_gone = true;
        rlm_session_cancel(slot->s);
      }
    }
  }
}
