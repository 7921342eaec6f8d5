package dev.ringlm;

/** Why a turn ended (rlm_stop_reason). */
public enum StopReason {
  /** The turn goes on: step again. */
  NONE,
  /** The model sampled one of its end tokens (or a caller-added stop token). */
  END_TOKEN,
  /** A stop string appeared; it is not part of the text. */
  STOP_STRING,
  /** The max-tokens budget of the turn was reached. */
  MAX_TOKENS,
  /** The session's grammar is complete and nothing may follow (rlm_session_set_grammar). */
  GRAMMAR;

  private static final StopReason[] VALUES = values();

  static StopReason of(int code) {
    return code >= 0 && code < VALUES.length ? VALUES[code] : NONE;
  }
}
