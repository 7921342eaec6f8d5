#include "speculation_flags.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char kSpecFlagsHelp[] =
    "Speculative decoding (same output as without it, token for token; faster when drafts are\n"
    "accepted):\n"
    "      --draft MODEL       draft with a smaller model of the same vocabulary\n"
    "      --draft-max K       most draft tokens per target pass, 1..64 (default 8)\n"
    "      --draft-p-min P     draft model: stop drafting below this top probability (default\n"
    "                          0.75)\n"
    "      --lookup            prompt lookup: draft what followed the last n tokens earlier in\n"
    "                          the prompt or output (no second model)\n"
    "      --lookup-ngram A:B  lookup suffix lengths tried, longest first (default 2:4; max 16)\n";

bool parse_spec_flag(const char* verb, int argc, char** argv, int* i, SpecFlags* f,
                     bool* handled) {
  const std::string a = argv[*i];
  *handled = false;
  if (a == "--lookup") {
    f->lookup = true;
    *handled = true;
    return true;
  }
  if (a != "--draft" && a != "--draft-max" && a != "--draft-p-min" && a != "--lookup-ngram") {
    return true;
  }
  *handled = true;
  if (*i + 1 >= argc) {
    fprintf(stderr, "ringlm %s: %s needs a value\n", verb, a.c_str());
    return false;
  }
  const char* v = argv[++*i];
  bool ok = true;
  if (a == "--draft") {
    f->draft_path = v;
    ok = *v != '\0';
  } else if (a == "--draft-max") {
    ok = parse_u32(v, &f->draft_max) && f->draft_max >= 1 && f->draft_max <= 64;
  } else if (a == "--draft-p-min") {
    ok = parse_f32(v, &f->p_min) && f->p_min >= 0.0f && f->p_min <= 1.0f;
  } else {
    unsigned lo = 0, hi = 0;
    char tail = 0;
    ok = sscanf(v, "%u:%u%c", &lo, &hi, &tail) == 2 && lo >= 1 && lo <= hi && hi <= 16;
    f->ngram_min = lo;
    f->ngram_max = hi;
  }
  if (!ok) fprintf(stderr, "ringlm %s: bad value '%s' for %s\n", verb, v, a.c_str());
  return ok;
}

bool spec_flags_check(const char* verb, const SpecFlags& f) {
  if (f.lookup && !f.draft_path.empty()) {
    fprintf(stderr, "ringlm %s: --draft and --lookup exclude each other\n", verb);
    return false;
  }
  return true;
}

bool CliDrafter::start(const char* verb, const SpecFlags& f, rlm_session* target,
                       const rlm_session_config& target_cfg) {
  rlm_speculation spec;
  rlm_speculation_default(&spec);
  spec.n_max = f.draft_max;
  if (f.lookup) {
    kind_ = "lookup";
    spec.mode = RLM_SPEC_LOOKUP;
    spec.ngram_min = f.ngram_min;
    spec.ngram_max = f.ngram_max;
  } else {
    kind_ = "draft";
    std::string err;
    if (!file_.open(f.draft_path, &err)) {
      fprintf(stderr, "ringlm %s: --draft: %s\n", verb, err.c_str());
      return false;
    }
    const rlm_status st = rlm_model_open(file_.data(), file_.size(), &model_);
    if (st != RLM_OK) {
      fprintf(stderr, "ringlm %s: --draft %s: %s: %s\n", verb, f.draft_path.c_str(),
              rlm_status_string(st), rlm_model_error(&model_));
      return false;
    }
    rlm_session_config dc = target_cfg;
    dc.max_pending = 64;  // the target feeds it through the runtime, never through this buffer
    dc.max_draft = f.draft_max > 1 ? f.draft_max - 1 : 0;
    if (!draft_.open(verb, &model_, dc, nullptr)) return false;
    spec.mode = RLM_SPEC_DRAFT_MODEL;
    spec.draft = draft_.get();
    spec.p_min = f.p_min;
  }
  const rlm_status st = rlm_session_set_speculation(target, &spec);
  if (st != RLM_OK) {
    fprintf(stderr, "ringlm %s: speculation: %s: %s\n", verb, rlm_status_string(st),
            rlm_session_error(target));
    return false;
  }
  return true;
}

std::string CliDrafter::stats(rlm_session* target) const {
  rlm_spec_stats st;
  rlm_spec_stats_default(&st);
  if (rlm_session_spec_stats(target, &st) != RLM_OK) return "";
  char buf[160];
  snprintf(buf, sizeof buf, "spec %s: %llu drafted, %llu accepted (%.1f %%)", kind_.c_str(),
           static_cast<unsigned long long>(st.drafted),
           static_cast<unsigned long long>(st.accepted),
           st.drafted ? 100.0 * static_cast<double>(st.accepted) / static_cast<double>(st.drafted)
                      : 0.0);
  return buf;
}
