/* consumer MODEL [PROMPT] [N]: memory-maps a model, generates N tokens greedily (default 16)
 * and prints the continuation. Plain C99 against the installed <ringlm/ringlm.h>. */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ringlm/ringlm.h>

int main(int argc, char** argv) {
  const char* prompt = argc > 2 ? argv[2] : "Once upon a time";
  const unsigned n = argc > 3 ? (unsigned)atoi(argv[3]) : 16u;
  struct stat sb;
  void* file;
  int fd;
  rlm_model model;
  rlm_session_config cfg;
  rlm_sampling sp;
  rlm_session* s = NULL;
  rlm_step_result r;
  rlm_status st;
  size_t bytes = 0, align = 0;
  void* mem = NULL;
  int rc = 0;

  if (argc < 2) {
    fprintf(stderr, "usage: %s MODEL [PROMPT] [N]\n", argv[0]);
    return 2;
  }
  fd = open(argv[1], O_RDONLY);
  if (fd < 0 || fstat(fd, &sb) != 0) {
    perror(argv[1]);
    return 1;
  }
  file = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0); /* page-aligned */
  close(fd);
  if (file == MAP_FAILED) {
    perror("mmap");
    return 1;
  }
  st = rlm_model_open(file, (size_t)sb.st_size, &model);
  if (st != RLM_OK) {
    fprintf(stderr, "%s: %s\n", rlm_status_string(st), rlm_model_error(&model));
    return 1;
  }
  rlm_session_config_default(&cfg);
  cfg.n_ctx = 256;
  if (rlm_session_memory(&model, &cfg, &bytes, &align) != RLM_OK ||
      posix_memalign(&mem, align, bytes) != 0) {
    return 1;
  }
  st = rlm_session_init(&model, &cfg, mem, bytes, &s);
  if (st != RLM_OK) {
    fprintf(stderr, "init: %s\n", rlm_status_string(st));
    return 1;
  }
  rlm_sampling_default(&sp);
  sp.temperature = 0.0f; /* greedy */
  rlm_session_set_sampling(s, &sp);
  rlm_session_set_max_tokens(s, n);
  if (rlm_session_feed_text(s, prompt, strlen(prompt)) != RLM_OK) rc = 1;
  rlm_step_result_default(&r);
  while (rc == 0) {
    st = rlm_step(s, &r);
    if (st != RLM_OK) {
      fprintf(stderr, "step: %s: %s\n", rlm_status_string(st), rlm_session_error(s));
      rc = 1;
      break;
    }
    fwrite(r.text, 1, r.text_len, stdout);
    if (r.stop != RLM_STOP_NONE) break;
  }
  printf("\n");
  rlm_session_release(s);
  free(mem);
  munmap(file, (size_t)sb.st_size);
  return rc;
}
