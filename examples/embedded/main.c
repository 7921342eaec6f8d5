/* The model is part of the executable: stories260K (q8), turned into a C array by
 * `ringlm embed` at build time. Opening it, the session (a static arena in .bss) and generation
 * do no file I/O at all: no open, no read, no file mmap after startup (a CTest checks it with
 * strace; see docs/apps.md).
 *
 * usage: embedded_generate [PROMPT] [N] */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ringlm/ringlm.h"

/* Defined by the generated stories260K_q8.c (64-byte aligned). */
extern const unsigned char stories260K_q8[];
extern const size_t stories260K_q8_size;

/* Session memory: static, zero-initialised (.bss), so nothing is read from the file for it. */
static _Alignas(64) unsigned char arena[4u << 20];

int main(int argc, char** argv) {
  const char* prompt = argc > 1 ? argv[1] : "Once upon a time";
  const unsigned n = argc > 2 ? (unsigned)atoi(argv[2]) : 64u;
  static char marker;
  rlm_model model;
  rlm_session_config cfg;
  rlm_sampling sp;
  rlm_session* s = NULL;
  rlm_step_result r;
  rlm_status st;
  size_t bytes = 0, align = 0;

  /* Startup is over: a zero-length read of fd -1 marks this point in an strace log
   * ("read(-1, ..., 0) = -1 EBADF"); the test allows no open/openat/read/file mmap after it. */
  if (read(-1, &marker, 0) != -1) return 3;

  st = rlm_model_open(stories260K_q8, stories260K_q8_size, &model);
  if (st != RLM_OK) {
    fprintf(stderr, "%s: %s\n", rlm_status_string(st), rlm_model_error(&model));
    return 1;
  }
  rlm_session_config_default(&cfg);
  cfg.n_ctx = 256;
  st = rlm_session_memory(&model, &cfg, &bytes, &align);
  if (st != RLM_OK || bytes > sizeof arena) {
    fprintf(stderr, "session needs %zu bytes, arena has %zu\n", bytes, sizeof arena);
    return 1;
  }
  st = rlm_session_init(&model, &cfg, arena, sizeof arena, &s);
  if (st != RLM_OK) {
    fprintf(stderr, "init: %s\n", rlm_status_string(st));
    return 1;
  }
  rlm_sampling_default(&sp);
  sp.temperature = 0.0f;
  rlm_session_set_sampling(s, &sp);
  rlm_session_set_max_tokens(s, n);
  if (rlm_session_feed_text(s, prompt, strlen(prompt)) != RLM_OK) return 1;
  rlm_step_result_default(&r);
  do {
    st = rlm_step(s, &r);
    if (st != RLM_OK) {
      fprintf(stderr, "step: %s: %s\n", rlm_status_string(st), rlm_session_error(s));
      return 1;
    }
    fwrite(r.text, 1, r.text_len, stdout);
  } while (r.stop == RLM_STOP_NONE);
  fputc('\n', stdout);
  fflush(stdout);
  rlm_session_release(s);
  return 0;
}
