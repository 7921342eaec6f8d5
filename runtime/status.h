// Status values and the check-or-return macros every runtime file uses.
//
// Errors are values: nothing in runtime/ aborts, exits or throws on bad input. A failed check
// writes its message into the caller's ErrorSink (a fixed buffer inside the model or session),
// so the message survives to the C ABI without any allocation or global state.
//
// Messages are for the user ("n_ctx 1 out of [2, 16777216]"). Builds with
// RINGLM_ERROR_LOCATIONS = 1 prefix them with the failing check's source location
// ("session.cc:115: n_ctx 1 ..."), for debugging the runtime itself. Unless the build defines
// it (-DRINGLM_ERROR_LOCATIONS=0 or 1), it is 1 in builds without NDEBUG (CMake's Debug) and
// 0 otherwise (Release, RelWithDebInfo, MinSizeRel). Location-free builds keep no file names
// in the binary.
#ifndef RINGLM_RUNTIME_STATUS_H_
#define RINGLM_RUNTIME_STATUS_H_

#include <stddef.h>

#include "ringlm/ringlm.h"

#ifndef RINGLM_ERROR_LOCATIONS
#ifdef NDEBUG
#define RINGLM_ERROR_LOCATIONS 0
#else
#define RINGLM_ERROR_LOCATIONS 1
#endif
#endif

namespace ringlm::internal {

using Status = rlm_status;

// A borrowed, fixed-size message buffer. A null sink (or buf) discards messages.
struct ErrorSink {
  char* buf;
  size_t cap;
};

// Formats <fmt...> into sink, printf-style; no allocation. With RINGLM_ERROR_LOCATIONS and a
// non-null `file`, prefixed with "basename(file):line: ".
void set_error(ErrorSink* sink, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));

inline void clear_error(ErrorSink* sink) {
  if (sink && sink->buf && sink->cap) sink->buf[0] = '\0';
}

}  // namespace ringlm::internal

// Writes a message into `sink`, with this line's location when RINGLM_ERROR_LOCATIONS is on.
#if RINGLM_ERROR_LOCATIONS
#define RLM_SET_ERROR(sink, ...) ::ringlm::internal::set_error((sink), __FILE__, __LINE__, __VA_ARGS__)
#else
#define RLM_SET_ERROR(sink, ...) ::ringlm::internal::set_error((sink), nullptr, 0, __VA_ARGS__)
#endif

// Return `status` with a message when `cond` is false.
#define RLM_CHECK(cond, status, sink, ...) \
  do {                                     \
    if (!(cond)) {                         \
      RLM_SET_ERROR((sink), __VA_ARGS__);  \
      return (status);                     \
    }                                      \
  } while (0)

// Propagate a non-OK status unchanged (the callee already wrote the message).
#define RLM_RETURN_IF_ERROR(expr)             \
  do {                                        \
    const ::ringlm::internal::Status rlm_s_ = (expr);   \
    if (rlm_s_ != RLM_OK) return rlm_s_;      \
  } while (0)

#endif  // RINGLM_RUNTIME_STATUS_H_
