// The module map: `@import RingLM;` (Objective-C) must find ringlm/module.modulemap and export
// the C ABI. Compiled by clang -fmodules -fsyntax-only -Werror.
@import RingLM;

int ringlm_module_check(void);

int ringlm_module_check(void) {
  rlm_session_config cfg;
  rlm_session_config_default(&cfg);
  return (int)cfg.n_ctx + (int)RLM_OK + (int)rlm_status_string(RLM_ERR_INTERNAL)[0];
}
