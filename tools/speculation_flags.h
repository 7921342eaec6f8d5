// Speculative-decoding flags of the verbs that generate (generate, chat): --draft / --lookup and
// their knobs, and the draft model + session they open (tool-owned memory, like the target's).
#ifndef RINGLM_TOOLS_SPECULATION_FLAGS_H_
#define RINGLM_TOOLS_SPECULATION_FLAGS_H_

#include <stdint.h>

#include <string>

#include "cli_common.h"
#include "mapped_file.h"
#include "ringlm/ringlm.h"

struct SpecFlags {
  std::string draft_path;  // --draft MODEL
  bool lookup = false;     // --lookup
  uint32_t draft_max = 8;  // --draft-max K
  float p_min = 0.75f;     // --draft-p-min P
  uint32_t ngram_min = 2, ngram_max = 4;  // --lookup-ngram MIN:MAX
  bool any() const { return lookup || !draft_path.empty(); }
};

extern const char kSpecFlagsHelp[];

// As parse_session_flag, for the flags above. Also checks they are consistent once parsed:
// call spec_flags_check after the loop.
bool parse_spec_flag(const char* verb, int argc, char** argv, int* i, SpecFlags* f,
                     bool* handled);
// --draft and --lookup together, or knobs without either: false with a message.
bool spec_flags_check(const char* verb, const SpecFlags& f);

// The drafter of a target session: for --draft, the draft model (mapped) and its session (the
// target's config with the draft's own context); then rlm_session_set_speculation on the target.
class CliDrafter {
 public:
  // `target_cfg` is the target's config (its max_draft already set to f.draft_max). Prints
  // "ringlm VERB: ..." and returns false on a problem (another vocabulary, a bad file...).
  bool start(const char* verb, const SpecFlags& f, rlm_session* target,
             const rlm_session_config& target_cfg);
  // "lookup" / "draft" and the counters since start, as one stats fragment:
  // "spec lookup: 96 drafted, 80 accepted (83.3 %)".
  std::string stats(rlm_session* target) const;
  size_t draft_bytes() const { return draft_.bytes(); }

 private:
  std::string kind_;
  MappedFile file_;
  rlm_model model_{};
  CliSession draft_;
};

#endif  // RINGLM_TOOLS_SPECULATION_FLAGS_H_
