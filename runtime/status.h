// Status values and the check-or-return macros every runtime file uses.
//
// Errors are values: nothing in runtime/ aborts, exits or throws on bad input. A failed check
// writes "file:line: message" into the caller's ErrorSink (a fixed buffer inside the model or
// session), so the message survives to the C ABI without any allocation or global state.
#ifndef RINGLM_RUNTIME_STATUS_H_
#define RINGLM_RUNTIME_STATUS_H_

#include <stddef.h>

#include "ringlm/ringlm.h"

namespace ringlm {

using Status = rlm_status;

// A borrowed, fixed-size message buffer. A null sink (or buf) discards messages.
struct ErrorSink {
  char* buf;
  size_t cap;
};

// Formats "basename(file):line: <fmt...>" into sink. printf-style; no allocation.
void set_error(ErrorSink* sink, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));

inline void clear_error(ErrorSink* sink) {
  if (sink && sink->buf && sink->cap) sink->buf[0] = '\0';
}

}  // namespace ringlm

// Return `status` with a message when `cond` is false.
#define RLM_CHECK(cond, status, sink, ...)                         \
  do {                                                             \
    if (!(cond)) {                                                 \
      ::ringlm::set_error((sink), __FILE__, __LINE__, __VA_ARGS__); \
      return (status);                                             \
    }                                                              \
  } while (0)

// Propagate a non-OK status unchanged (the callee already wrote the message).
#define RLM_RETURN_IF_ERROR(expr)             \
  do {                                        \
    const ::ringlm::Status rlm_s_ = (expr);   \
    if (rlm_s_ != RLM_OK) return rlm_s_;      \
  } while (0)

#endif  // RINGLM_RUNTIME_STATUS_H_
