#include "status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

namespace ringlm::internal {

void set_error(ErrorSink* sink, const char* file, int line, const char* fmt, ...) {
  if (!sink || !sink->buf || sink->cap == 0) return;
  int n = 0;
#if RINGLM_ERROR_LOCATIONS
  if (file) {
    const char* base = strrchr(file, '/');
    base = base ? base + 1 : file;
    n = snprintf(sink->buf, sink->cap, "%s:%d: ", base, line);
    if (n < 0 || static_cast<size_t>(n) >= sink->cap) return;
  }
#else
  (void)file;
  (void)line;
#endif
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(sink->buf + n, sink->cap - static_cast<size_t>(n), fmt, ap);
  va_end(ap);
}

}  // namespace ringlm::internal

extern "C" const char* rlm_status_string(rlm_status status) {
  switch (status) {
#define RLM_CASE(x) \
  case x:           \
    return #x;
    RLM_CASE(RLM_OK)
    RLM_CASE(RLM_ERR_INVALID_ARGUMENT)
    RLM_CASE(RLM_ERR_STRUCT_SIZE)
    RLM_CASE(RLM_ERR_BUFFER_TOO_SMALL)
    RLM_CASE(RLM_ERR_MISALIGNED)
    RLM_CASE(RLM_ERR_BAD_STATE)
    RLM_CASE(RLM_ERR_TOKEN_OUT_OF_RANGE)
    RLM_CASE(RLM_ERR_INVALID_UTF8)
    RLM_CASE(RLM_ERR_CAPACITY)
    RLM_CASE(RLM_ERR_REWIND)
    RLM_CASE(RLM_ERR_THREADS)
    RLM_CASE(RLM_ERR_NOT_FOUND)
    RLM_CASE(RLM_ERR_UNSUPPORTED)
    RLM_CASE(RLM_ERR_BACKEND)
    RLM_CASE(RLM_ERR_MODEL_TRUNCATED)
    RLM_CASE(RLM_ERR_MODEL_IDENTIFIER)
    RLM_CASE(RLM_ERR_MODEL_VERSION)
    RLM_CASE(RLM_ERR_MODEL_CORRUPT)
    RLM_CASE(RLM_ERR_MODEL_HPARAMS)
    RLM_CASE(RLM_ERR_MODEL_TENSOR)
    RLM_CASE(RLM_ERR_MODEL_BOUNDS)
    RLM_CASE(RLM_ERR_MODEL_OVERLAP)
    RLM_CASE(RLM_ERR_MODEL_ALIGNMENT)
    RLM_CASE(RLM_ERR_MODEL_TOKENIZER)
    RLM_CASE(RLM_ERR_MODEL_UNSUPPORTED)
    RLM_CASE(RLM_ERR_INTERNAL)
    RLM_CASE(RLM_ERR_NO_CANDIDATES)
    RLM_CASE(RLM_ERR_GRAMMAR)
    RLM_CASE(RLM_ERR_SNAPSHOT_CORRUPT)
    RLM_CASE(RLM_ERR_SNAPSHOT_MISMATCH)
    RLM_CASE(RLM_ERR_CANCELLED)
#undef RLM_CASE
  }
  return "RLM_ERR_UNKNOWN";
}
