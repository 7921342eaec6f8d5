package dev.ringlm;

/**
 * A failed runtime call. {@link #status()} is the C status name (rlm_status_string, e.g.
 * "RLM_ERR_MODEL_ALIGNMENT"), {@link #code()} its number, {@link #detail()} the runtime's
 * message (rlm_model_error / rlm_session_error; may be empty).
 */
public class RingLmException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final int code;
  private final String status;
  private final String detail;

  /** Called from native code (bindings/jni/ringlm_jni.c). */
  public RingLmException(int code, String status, String detail) {
    super(detail == null || detail.isEmpty() ? status : status + ": " + detail);
    this.code = code;
    this.status = status;
    this.detail = detail == null ? "" : detail;
  }

  /** The rlm_status value. */
  public int code() {
    return code;
  }

  /** The status name, e.g. "RLM_ERR_BUFFER_TOO_SMALL". */
  public String status() {
    return status;
  }

  /** The runtime's message ("" if none). */
  public String detail() {
    return detail;
  }
}
