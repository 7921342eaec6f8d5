// Flags shared by the verbs that run a session (generate, chat): sampling and session config.
#ifndef RINGLM_TOOLS_CLI_COMMON_H_
#define RINGLM_TOOLS_CLI_COMMON_H_

#include <string>
#include <vector>

#include "ringlm/ringlm.h"

struct SessionFlags {
  rlm_sampling sampling;
  rlm_session_config config;
  std::vector<rlm_logit_bias> logit_bias;
  SessionFlags() {
    rlm_sampling_default(&sampling);
    rlm_session_config_default(&config);
  }
};

// Help text for the flags parse_session_flag understands.
extern const char kSessionFlagsHelp[];

// If argv[*i] is one of the shared flags, consumes it (and its value), sets *handled and
// returns false on a bad value (message printed, prefixed with `verb`). Otherwise *handled=false.
bool parse_session_flag(const char* verb, int argc, char** argv, int* i, SessionFlags* f,
                        bool* handled);

// Applies f.logit_bias to f.sampling (pointer into f) — call after parsing, before use.
void finish_session_flags(SessionFlags* f);

bool parse_u32(const char* s, uint32_t* out);
bool parse_f32(const char* s, float* out);

#endif  // RINGLM_TOOLS_CLI_COMMON_H_
