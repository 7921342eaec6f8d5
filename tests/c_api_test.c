/* End-to-end test of the C ABI from strict C99: convert stories260K with the ringlm tool, open
 * it, size and carve a session, generate greedily, and compare with llama2.c's output.
 * argv[1] = shared data dir, argv[2] = ringlm executable. Exit 77 = skipped (no shared data). */
#define _POSIX_C_SOURCE 200112L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ringlm/ringlm.h"

static int failures = 0;
#define EXPECT(cond)                                                  \
  do {                                                                \
    if (!(cond)) {                                                    \
      fprintf(stderr, "%s:%d: EXPECT failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                     \
    }                                                                 \
  } while (0)

static char* read_all(const char* path, size_t* size, size_t align) {
  FILE* f = fopen(path, "rb");
  void* buf = NULL;
  long n;
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  n = ftell(f);
  fseek(f, 0, SEEK_SET);
  if (n < 0 || posix_memalign(&buf, align, (size_t)n + 1) != 0) {
    fclose(f);
    return NULL;
  }
  if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    fclose(f);
    return NULL;
  }
  fclose(f);
  ((char*)buf)[n] = '\0';
  *size = (size_t)n;
  return (char*)buf;
}

int main(int argc, char** argv) {
  char cmd[4096], path_bin[1024], path_tok[1024], path_ref[1024], out_path[256];
  char *model_bytes, *ref, *mem, *expected;
  size_t model_size = 0, ref_size = 0, need = 0, align = 0, got_len = 0;
  rlm_model model;
  rlm_session_config cfg;
  rlm_session* s = NULL;
  rlm_step_result r;
  rlm_status st;
  static char got[8192];
  FILE* probe;

  if (argc < 3) return 2;
  sprintf(path_bin, "%s/models/stories260K/stories260K.bin", argv[1]);
  sprintf(path_tok, "%s/models/stories260K/tok512.bin", argv[1]);
  sprintf(path_ref, "%s/references/stories260K/once-upon-a-time.greedy.txt", argv[1]);
  probe = fopen(path_bin, "rb");
  if (!probe) {
    printf("SKIPPED: %s not found\n", path_bin);
    return 77;
  }
  fclose(probe);
  sprintf(out_path, "/tmp/ringlm-c-api-test-%ld.rlm", (long)rand());
  sprintf(cmd, "%s convert '%s' --tokenizer '%s' --quant f32 -o '%s' >/dev/null 2>&1", argv[2],
          path_bin, path_tok, out_path);
  if (system(cmd) != 0) {
    fprintf(stderr, "convert failed: %s\n", cmd);
    return 1;
  }
  model_bytes = read_all(out_path, &model_size, 64);
  remove(out_path);
  if (!model_bytes) return 1;

  EXPECT(strcmp(rlm_status_string(RLM_ERR_BUFFER_TOO_SMALL), "RLM_ERR_BUFFER_TOO_SMALL") == 0);
  st = rlm_model_open(model_bytes, model_size, &model);
  EXPECT(st == RLM_OK);
  if (st != RLM_OK) {
    fprintf(stderr, "open: %s %s\n", rlm_status_string(st), rlm_model_error(&model));
    return 1;
  }
  /* A model one byte short is rejected with a named status. */
  {
    rlm_model m2;
    EXPECT(rlm_model_open(model_bytes, model_size - 1, &m2) != RLM_OK);
  }

  rlm_session_config_default(&cfg);
  EXPECT(rlm_session_memory(&model, &cfg, &need, &align) == RLM_OK);
  EXPECT(need > 0 && align == 64);
  if (posix_memalign((void**)&mem, align, need) != 0) return 1;
  /* One byte short fails; the exact size works. */
  EXPECT(rlm_session_init(&model, &cfg, mem, need - 1, &s) == RLM_ERR_BUFFER_TOO_SMALL);
  EXPECT(rlm_session_init(&model, &cfg, mem + 1, need, &s) == RLM_ERR_MISALIGNED);
  cfg.struct_size = 3;
  EXPECT(rlm_session_init(&model, &cfg, mem, need, &s) == RLM_ERR_STRUCT_SIZE);
  rlm_session_config_default(&cfg);
  st = rlm_session_init(&model, &cfg, mem, need, &s);
  EXPECT(st == RLM_OK);
  if (st != RLM_OK) return 1;

  {
    rlm_sampling sp;
    rlm_sampling_default(&sp);
    sp.temperature = 0.0f;
    EXPECT(rlm_session_set_sampling(s, &sp) == RLM_OK);
  }
  EXPECT(rlm_step(s, NULL) == RLM_ERR_INVALID_ARGUMENT);
  rlm_step_result_default(&r);
  EXPECT(rlm_step(s, &r) == RLM_ERR_BAD_STATE); /* nothing fed yet */
  {
    const int32_t bad = 100000;
    EXPECT(rlm_session_feed_tokens(s, &bad, 1) == RLM_ERR_TOKEN_OUT_OF_RANGE);
  }
  EXPECT(rlm_session_feed_text(s, "Once upon a time", 16) == RLM_OK);
  EXPECT(rlm_session_set_max_tokens(s, 300) == RLM_OK);
  for (;;) {
    st = rlm_step(s, &r);
    EXPECT(st == RLM_OK);
    if (st != RLM_OK) break;
    if (got_len + r.text_len < sizeof got) {
      memcpy(got + got_len, r.text, r.text_len);
      got_len += r.text_len;
    }
    if (r.stop != RLM_STOP_NONE || got_len > 700) break;
  }
  got[got_len] = '\0';

  ref = read_all(path_ref, &ref_size, 8);
  EXPECT(ref != NULL);
  if (ref) {
    /* The reference is llama2.c's output: the prompt, then the continuation, then "\n". */
    while (ref_size > 0 && ref[ref_size - 1] == '\n') ref[--ref_size] = '\0';
    expected = ref + strlen("Once upon a time");
    EXPECT(strncmp(ref, "Once upon a time", 16) == 0);
    EXPECT(got_len >= strlen(expected));
    EXPECT(strncmp(got, expected, strlen(expected)) == 0);
    if (strncmp(got, expected, strlen(expected)) != 0) {
      fprintf(stderr, "expected: %s\n     got: %s\n", expected, got);
    }
    free(ref);
  }
  /* rlm_tokenize_ex: ADD_BOS | PARSE_SPECIALS is rlm_tokenize with add_bos; unknown flag bits are
   * refused; rlm_session_feed_text_ex takes PARSE_SPECIALS or 0 and nothing else. */
  {
    static uint64_t scratch[4096];
    int32_t a[64], b[64];
    size_t na = 0, nb = 0, i;
    EXPECT(rlm_tokenize_scratch_bytes(&model, 16) <= sizeof scratch);
    EXPECT(rlm_tokenize(&model, "Once upon a time", 16, 1, a, 64, &na, scratch,
                        sizeof scratch) == RLM_OK);
    EXPECT(rlm_tokenize_ex(&model, "Once upon a time", 16,
                           RLM_TOKENIZE_ADD_BOS | RLM_TOKENIZE_PARSE_SPECIALS, b, 64, &nb,
                           scratch, sizeof scratch) == RLM_OK);
    EXPECT(na == nb && na > 1);
    for (i = 0; i < na && i < nb; ++i) EXPECT(a[i] == b[i]);
    EXPECT(rlm_tokenize_ex(&model, "Once upon a time", 16, 0, b, 64, &nb, scratch,
                           sizeof scratch) == RLM_OK);
    EXPECT(nb + 1 == na); /* no BOS */
    EXPECT(rlm_tokenize_ex(&model, "a", 1, 0x4u, b, 64, &nb, scratch, sizeof scratch) ==
           RLM_ERR_INVALID_ARGUMENT);
    EXPECT(rlm_session_reset(s) == RLM_OK);
    EXPECT(rlm_session_feed_text_ex(s, "a", 1, RLM_TOKENIZE_ADD_BOS) == RLM_ERR_INVALID_ARGUMENT);
    EXPECT(rlm_session_feed_text_ex(s, "Once", 4, 0) == RLM_OK);
    EXPECT(rlm_session_feed_text_ex(s, " upon", 5, RLM_TOKENIZE_PARSE_SPECIALS) == RLM_OK);
  }
  rlm_session_release(s);
  free(mem);
  free(model_bytes);
  printf("c_api_test: %s\n", failures ? "FAILED" : "passed");
  return failures ? 1 : 0;
}
