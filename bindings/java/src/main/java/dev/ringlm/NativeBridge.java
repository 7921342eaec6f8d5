package dev.ringlm;

import java.nio.ByteBuffer;

/**
 * The native methods of libringlm-jni (bindings/jni/ringlm_jni.c). Package-private: the public API
 * is {@link Model} and {@link Session}. Every method maps onto one C ABI call; failures throw
 * {@link RingLmException} from native code. None of them allocates native memory; the only Java
 * objects they create are the text String of {@link #step} (and exceptions on failure).
 */
final class NativeBridge {
  private NativeBridge() {}

  static {
    // -Dringlm.jni.library=/abs/path/libringlm-jni.so overrides the library search path.
    String explicit = System.getProperty("ringlm.jni.library");
    if (explicit != null && !explicit.isEmpty()) {
      System.load(explicit);
    } else {
      System.loadLibrary("ringlm-jni");
    }
  }

  /** Forces the class (and so the library) to load. */
  static void load() {}

  // Indices of the int[] session configuration (rlm_session_config fields, in order).
  static final int CFG_N_CTX = 0, CFG_N_SINK = 1, CFG_KV_DTYPE = 2, CFG_N_THREADS = 3,
      CFG_N_BATCH = 4, CFG_MAX_PENDING = 5, CFG_MAX_TEXT_BYTES = 6, CFG_STOP_STRING_BYTES = 7,
      CFG_MAX_STOP_STRINGS = 8, CFG_MAX_STOP_TOKENS = 9, CFG_PENALTY_WINDOW = 10,
      CFG_MAX_LOGIT_BIAS = 11, CFG_COUNT = 12;

  // Indices of the float[] / int[] sampling parameters.
  static final int SF_TEMPERATURE = 0, SF_TOP_P = 1, SF_MIN_P = 2, SF_REPEAT_PENALTY = 3,
      SF_FREQUENCY_PENALTY = 4, SF_PRESENCE_PENALTY = 5, SF_COUNT = 6;
  static final int SI_TOP_K = 0, SI_PENALTY_LAST_N = 1, SI_COUNT = 2;

  // Indices of the int[] a step writes (no objects created for them).
  static final int STEP_TOKEN = 0, STEP_POSITION = 1, STEP_STOP = 2, STEP_N_EVALUATED = 3,
      STEP_TEXT_BYTES = 4, STEP_COUNT = 5;

  // Model info (long[]): n_layers, dim, n_heads, n_kv_heads, head_dim, ffn_dim, vocab_size,
  // max_context, bos_id, eos_id, n_tensors, weight_bytes.
  static final int INFO_COUNT = 12;

  /** rlm_status_string(code). */
  static native String statusString(int code);

  /** Address of a direct buffer's first element, or -1 when it is not direct. */
  static native long address(ByteBuffer buffer);

  /** sizeof(rlm_model): the caller storage an opened model lives in. */
  static native int modelStorageBytes();

  /** rlm_model_open(bytes[0, size), storage). */
  static native void modelOpen(ByteBuffer bytes, long size, ByteBuffer storage);

  static native void modelInfo(ByteBuffer storage, long[] out);

  static native void configDefaults(int[] config);

  static native void samplingDefaults(float[] f, int[] i, long[] seed);

  /** rlm_session_memory: returns the bytes; out[0] receives the alignment. */
  static native long sessionMemory(ByteBuffer modelStorage, int[] config, long[] alignment);

  /** rlm_session_init on memory[0, size) (64-aligned direct buffer); returns the handle. */
  static native long sessionInit(ByteBuffer modelStorage, int[] config, ByteBuffer memory,
                                 long size);

  static native void sessionRelease(long session);

  static native void sessionReset(long session);

  static native void cancel(long session);

  static native void feedText(long session, byte[] utf8, int offset, int length, int flags);

  static native void feedDirect(long session, ByteBuffer utf8, int offset, int length, int flags);

  static native void feedTokens(long session, int[] tokens, int offset, int length);

  static native void setSampling(long session, float[] f, int[] i, long seed);

  static native void addStopString(long session, byte[] utf8, int offset, int length);

  static native void addStopToken(long session, int token);

  static native void clearStops(long session);

  static native void setMaxTokens(long session, int maxTokens);

  static native void setIgnoreEos(long session, boolean ignore);

  static native int position(long session);

  static native void rewind(long session, int position);

  /**
   * rlm_step; writes token/position/stop/n_evaluated/text bytes into info and returns the text
   * (null when the step released none). The UTF-8 text is decoded to UTF-16 in the session's
   * scratch memory (scratch, scratchChars jchars) and handed to NewString: the String is the only
   * object created.
   */
  static native String step(long session, int[] info, long scratch, int scratchChars);

  /**
   * rlm_step writing the UTF-8 text into out[offset, offset + capacity) (a direct buffer);
   * returns its byte count. Creates no Java object at all.
   */
  static native int stepInto(long session, int[] info, ByteBuffer out, int offset, int capacity);
}
