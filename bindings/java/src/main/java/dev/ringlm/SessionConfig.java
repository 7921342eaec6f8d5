package dev.ringlm;

/**
 * Session sizing (rlm_session_config). The defaults are the runtime's own
 * (rlm_session_config_default); every field is a budget carved out of the session memory.
 */
public final class SessionConfig {
  public static final int KV_F32 = 0;
  public static final int KV_F16 = 1;
  /** int8 values with one scale per head and position: about half of f16's memory. */
  public static final int KV_Q8 = 2;

  /** KV ring slots; 0 = the model's max context. */
  public int contextSlots;
  /** Attention-sink positions kept when the ring wraps. */
  public int sinks;
  /** KV cache precision: {@link #KV_F32}, {@link #KV_F16} or {@link #KV_Q8}. */
  public int kvDtype;
  /** Threads splitting each op, the caller's included (results do not depend on it). */
  public int threads;
  /** Max tokens per prefill pass. */
  public int batch;
  /** Prompt tokens that can be queued. */
  public int maxPending;
  /** Longest text one prompt() accepts, in UTF-8 bytes. */
  public int maxTextBytes;
  /** Bytes for all stop strings together. */
  public int stopStringBytes;
  public int maxStopStrings;
  public int maxStopTokens;
  /** Longest penalty window (Sampling.penaltyLastN) the session honours. */
  public int penaltyWindow;
  public int maxLogitBias;

  public SessionConfig() {
    NativeBridge.load();
    int[] v = new int[NativeBridge.CFG_COUNT];
    NativeBridge.configDefaults(v);
    contextSlots = v[NativeBridge.CFG_N_CTX];
    sinks = v[NativeBridge.CFG_N_SINK];
    kvDtype = v[NativeBridge.CFG_KV_DTYPE];
    threads = v[NativeBridge.CFG_N_THREADS];
    batch = v[NativeBridge.CFG_N_BATCH];
    maxPending = v[NativeBridge.CFG_MAX_PENDING];
    maxTextBytes = v[NativeBridge.CFG_MAX_TEXT_BYTES];
    stopStringBytes = v[NativeBridge.CFG_STOP_STRING_BYTES];
    maxStopStrings = v[NativeBridge.CFG_MAX_STOP_STRINGS];
    maxStopTokens = v[NativeBridge.CFG_MAX_STOP_TOKENS];
    penaltyWindow = v[NativeBridge.CFG_PENALTY_WINDOW];
    maxLogitBias = v[NativeBridge.CFG_MAX_LOGIT_BIAS];
  }

  int[] toArray() {
    int[] v = new int[NativeBridge.CFG_COUNT];
    v[NativeBridge.CFG_N_CTX] = contextSlots;
    v[NativeBridge.CFG_N_SINK] = sinks;
    v[NativeBridge.CFG_KV_DTYPE] = kvDtype;
    v[NativeBridge.CFG_N_THREADS] = threads;
    v[NativeBridge.CFG_N_BATCH] = batch;
    v[NativeBridge.CFG_MAX_PENDING] = maxPending;
    v[NativeBridge.CFG_MAX_TEXT_BYTES] = maxTextBytes;
    v[NativeBridge.CFG_STOP_STRING_BYTES] = stopStringBytes;
    v[NativeBridge.CFG_MAX_STOP_STRINGS] = maxStopStrings;
    v[NativeBridge.CFG_MAX_STOP_TOKENS] = maxStopTokens;
    v[NativeBridge.CFG_PENALTY_WINDOW] = penaltyWindow;
    v[NativeBridge.CFG_MAX_LOGIT_BIAS] = maxLogitBias;
    return v;
  }
}
