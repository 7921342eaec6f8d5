/* Header hygiene: ringlm.h compiled as strict C (C99 / C11) with -Wall -Wextra -pedantic
 * -Werror, included twice (guard), every type and function referenced. */
#include "ringlm/ringlm.h"
#include "ringlm/ringlm.h"

int ringlm_header_check(const void* bytes, size_t size);

int ringlm_header_check(const void* bytes, size_t size) {
  rlm_model model;
  rlm_model_info info;
  rlm_session_config cfg;
  rlm_sampling sp;
  rlm_step_result r;
  rlm_logit_bias bias;
  rlm_session* s = NULL;
  size_t need = 0, align = 0, n = 0;
  const float* logits = NULL;
  int32_t tok = 1;
  char piece[8];
  static unsigned char arena[64];
  rlm_status st = rlm_model_open(bytes, size, &model);
  if (st != RLM_OK) return (int)rlm_model_error(&model)[0] + (int)rlm_status_string(st)[0];
  rlm_model_info_default(&info);
  (void)rlm_model_get_info(&model, &info);
  rlm_session_config_default(&cfg);
  cfg.kv_dtype = RLM_KV_F16;
  (void)rlm_session_memory(&model, &cfg, &need, &align);
  if (rlm_session_init(&model, &cfg, arena, sizeof arena, &s) != RLM_OK) return 1;
  rlm_sampling_default(&sp);
  bias.token = 0;
  bias.bias = -1.0f;
  sp.logit_bias = &bias;
  sp.n_logit_bias = 1;
  (void)rlm_session_set_sampling(s, &sp);
  (void)rlm_session_add_stop_token(s, 2);
  (void)rlm_session_add_stop_string(s, "x", 1);
  (void)rlm_session_clear_stops(s);
  (void)rlm_session_set_max_tokens(s, 4);
  (void)rlm_session_set_ignore_eos(s, 0);
  (void)rlm_session_feed_text(s, "a", 1);
  (void)rlm_session_feed_text_ex(s, "a", 1, RLM_TOKENIZE_PARSE_SPECIALS);
  (void)rlm_session_feed_tokens(s, &tok, 1);
  rlm_step_result_default(&r);
  (void)rlm_step(s, &r);
  if (r.stop == RLM_STOP_MAX_TOKENS || r.stop == RLM_STOP_END_TOKEN ||
      r.stop == RLM_STOP_STOP_STRING || r.stop == RLM_STOP_NONE) {
    (void)rlm_session_eval(s);
  }
  (void)rlm_session_logits(s, &logits, &n);
  (void)rlm_session_rewind(s, rlm_session_position(s));
  (void)rlm_session_reset(s);
  (void)rlm_token_to_bytes(&model, 1, piece, sizeof piece, &n);
  (void)rlm_tokenize_scratch_bytes(&model, 1);
  (void)rlm_tokenize(&model, "a", 1, 1, &tok, 1, &n, arena, sizeof arena);
  (void)rlm_tokenize_ex(&model, "a", 1, RLM_TOKENIZE_ADD_BOS, &tok, 1, &n, arena, sizeof arena);
  (void)rlm_session_error(s);
  return (int)rlm_session_release(s) + (int)RLM_FORMAT_VERSION;
}
