package dev.ringlm;

import java.nio.Buffer;
import java.nio.ByteBuffer;
import java.nio.charset.Charset;
import java.util.function.Consumer;

/**
 * A generation session. All its memory (KV cache, activations, sampler scratch, stop strings,
 * the UTF-16 scratch of step()) is one direct ByteBuffer allocated by Java, or given by the
 * caller; the runtime never allocates. Close it (try-with-resources): close() calls
 * rlm_session_release, which also joins worker threads when threads > 1.
 *
 * <p>One thread at a time per session; different sessions may run on different threads.
 *
 * <p>Allocation on the step path: {@link #stepInto(ByteBuffer)} creates no Java object at all
 * (the step's numbers land in an int[] owned by the session, the text in the caller's direct
 * buffer). {@link #step()} creates the text String (decoded natively into session scratch and
 * handed to NewString; nothing for an empty step) and the StepResult.
 */
public final class Session implements AutoCloseable {
  private static final Charset UTF8 = Charset.forName("UTF-8");

  private final Model model;        // keeps the model bytes reachable
  private final ByteBuffer memory;  // the runtime's memory (64-aligned slice)
  private final ByteBuffer scratch; // UTF-16 scratch for step()
  private final int textCapacity;
  private final int[] info = new int[NativeBridge.STEP_COUNT];
  private long handle;

  /**
   * Bytes a step can release at most, for {@link #stepInto(ByteBuffer)}: the held-back prefix of
   * a stop string (under stopStringBytes) plus what one token settles (the runtime's text stream
   * capacity is stopStringBytes + 3 * (256 + 3); this leaves margin).
   */
  public static int stepTextCapacity(SessionConfig config) {
    return config.stopStringBytes + 1024;
  }

  /** Total bytes of a caller buffer for {@link #create(Model, SessionConfig, ByteBuffer)}. */
  public static long memoryBytes(Model model, SessionConfig config) {
    long runtime = (model.sessionMemory(config) + 63) / 64 * 64;
    return 63 + runtime + 2L * stepTextCapacity(config);
  }

  /** A session with the default config, in a direct buffer it allocates. */
  public static Session create(Model model) {
    return create(model, new SessionConfig());
  }

  /** A session in a direct buffer it allocates (ByteBuffer.allocateDirect). */
  public static Session create(Model model, SessionConfig config) {
    long total = memoryBytes(model, config);
    if (total > Integer.MAX_VALUE) {
      throw new IllegalArgumentException("session needs " + total + " bytes (over 2 GiB)");
    }
    return create(model, config, ByteBuffer.allocateDirect((int) total));
  }

  /**
   * A session in the caller's direct buffer (at least {@link #memoryBytes} bytes; any address:
   * the session aligns itself inside it). The buffer must outlive the session.
   */
  public static Session create(Model model, SessionConfig config, ByteBuffer memory) {
    if (memory == null || !memory.isDirect()) {
      throw new IllegalArgumentException("session memory must be a direct ByteBuffer");
    }
    long bytes = model.sessionMemory(config);
    long runtime = (bytes + 63) / 64 * 64;
    int text = stepTextCapacity(config);
    ByteBuffer all = Memory.alignedSlice(memory, runtime + 2L * text, 64);
    ByteBuffer dup = all.duplicate();
    ((Buffer) dup).limit((int) bytes);
    ByteBuffer runtimeMem = dup.slice();
    dup = all.duplicate();
    ((Buffer) dup).position((int) runtime);
    ByteBuffer scratch = dup.slice();
    long h = NativeBridge.sessionInit(model.storage(), config.toArray(), runtimeMem, bytes);
    return new Session(model, runtimeMem, scratch, text, h);
  }

  private Session(Model model, ByteBuffer memory, ByteBuffer scratch, int textCapacity, long h) {
    this.model = model;
    this.memory = memory;
    this.scratch = scratch;
    this.textCapacity = textCapacity;
    this.handle = h;
    this.scratchAddress = NativeBridge.address(scratch);
  }

  private final long scratchAddress;

  private long h() {
    if (handle == 0) throw new IllegalStateException("session closed");
    return handle;
  }

  /** The model this session runs. */
  public Model model() {
    return model;
  }

  /** Bytes of the runtime's session memory. */
  public long memorySize() {
    return memory.capacity();
  }

  /** Minimum remaining() of the buffer given to {@link #stepInto}. */
  public int stepTextCapacity() {
    return textCapacity;
  }

  // ---- input ------------------------------------------------------------------------------

  /**
   * Flag of {@link #prompt(String, int)}: text that spells a special token's piece becomes that
   * token (RLM_TOKENIZE_PARSE_SPECIALS). Only for text the application wrote itself (its own
   * template markers): text from a user must not be able to insert role tokens.
   */
  public static final int PARSE_SPECIALS = 0x1;

  /**
   * Queues text (tokenized in the runtime; BOS per the model at position 0), parsing special
   * tokens as {@code rlm_session_feed_text} does; for untrusted text use
   * {@link #prompt(String, int)} with flags 0. New turn.
   */
  public void prompt(String text) {
    prompt(text, PARSE_SPECIALS);
  }

  /** Queues text with explicit flags (0 or {@link #PARSE_SPECIALS}). New turn. */
  public void prompt(String text, int flags) {
    byte[] utf8 = text.getBytes(UTF8);
    NativeBridge.feedText(h(), utf8, 0, utf8.length, flags);
  }

  /** Queues UTF-8 text from a direct buffer (position to limit; not consumed). New turn. */
  public void prompt(ByteBuffer utf8) {
    prompt(utf8, PARSE_SPECIALS);
  }

  /** {@link #prompt(ByteBuffer)} with explicit flags (0 or {@link #PARSE_SPECIALS}). */
  public void prompt(ByteBuffer utf8, int flags) {
    if (!utf8.isDirect()) throw new IllegalArgumentException("prompt(ByteBuffer) needs a direct buffer");
    NativeBridge.feedDirect(h(), utf8, utf8.position(), utf8.remaining(), flags);
  }

  /** Queues token ids as given (no BOS). New turn. */
  public void promptTokens(int[] tokens) {
    NativeBridge.feedTokens(h(), tokens, 0, tokens.length);
  }

  // ---- the step -----------------------------------------------------------------------------

  /** One step: runs pending input or the last token, samples, detects stops. */
  public StepResult step() {
    String text = NativeBridge.step(h(), info, scratchAddress, textCapacity);
    return new StepResult(info[NativeBridge.STEP_TOKEN], info[NativeBridge.STEP_POSITION],
        text == null ? "" : text, StopReason.of(info[NativeBridge.STEP_STOP]),
        info[NativeBridge.STEP_N_EVALUATED]);
  }

  /**
   * One step without creating any object: the step's UTF-8 text is written at out.position()
   * (a direct buffer with at least {@link #stepTextCapacity()} bytes remaining), the position
   * advances, and the byte count is returned. Token, position and stop reason: {@link
   * #lastToken()}, {@link #lastPosition()}, {@link #lastStop()}, {@link #lastEvaluated()}.
   */
  public int stepInto(ByteBuffer out) {
    if (!out.isDirect()) throw new IllegalArgumentException("stepInto needs a direct ByteBuffer");
    if (out.remaining() < textCapacity) {
      throw new IllegalArgumentException("stepInto needs " + textCapacity + " bytes remaining, has "
          + out.remaining());
    }
    int pos = out.position();
    int n = NativeBridge.stepInto(h(), info, out, pos, out.remaining());
    ((Buffer) out).position(pos + n);
    return n;
  }

  /** Token sampled by the last step. */
  public int lastToken() {
    return info[NativeBridge.STEP_TOKEN];
  }

  /** Position of the token sampled by the last step. */
  public int lastPosition() {
    return info[NativeBridge.STEP_POSITION];
  }

  /** Stop reason of the last step (no allocation: enum constants). */
  public StopReason lastStop() {
    return StopReason.of(info[NativeBridge.STEP_STOP]);
  }

  /** Tokens the last step ran through the model. */
  public int lastEvaluated() {
    return info[NativeBridge.STEP_N_EVALUATED];
  }

  /**
   * Feeds the prompt and steps until a stop (or maxTokens tokens; 0 = no limit), passing each
   * non-empty piece of text to onText. Returns why it stopped.
   */
  public StopReason generate(String prompt, int maxTokens, Consumer<String> onText) {
    setMaxTokens(maxTokens);
    prompt(prompt);
    for (;;) {
      String text = NativeBridge.step(h(), info, scratchAddress, textCapacity);
      if (text != null) onText.accept(text);
      if (info[NativeBridge.STEP_STOP] != 0) return StopReason.of(info[NativeBridge.STEP_STOP]);
    }
  }

  // ---- sampling and stops -----------------------------------------------------------------

  public void setSampling(Sampling s) {
    NativeBridge.setSampling(h(), s.floats(), s.ints(), s.seed);
  }

  /** A stop string (never part of the released text). Copied into the session's budget. */
  public void addStopString(String stop) {
    byte[] utf8 = stop.getBytes(UTF8);
    NativeBridge.addStopString(h(), utf8, 0, utf8.length);
  }

  public void addStopToken(int token) {
    NativeBridge.addStopToken(h(), token);
  }

  public void clearStops() {
    NativeBridge.clearStops(h());
  }

  /** Tokens per turn before StopReason.MAX_TOKENS; 0 = unlimited. */
  public void setMaxTokens(int maxTokens) {
    NativeBridge.setMaxTokens(h(), maxTokens);
  }

  /** Keep going past the model's own end tokens (caller-added stop tokens still stop). */
  public void setIgnoreEos(boolean ignore) {
    NativeBridge.setIgnoreEos(h(), ignore);
  }

  // ---- position -----------------------------------------------------------------------------

  /** Tokens in the KV cache. */
  public int position() {
    return NativeBridge.position(h());
  }

  /** Drops positions >= position (RLM_ERR_REWIND once the ring has wrapped). */
  public void rewind(int position) {
    NativeBridge.rewind(h(), position);
  }

  /**
   * rlm_session_cancel: safe from any thread while another thread runs step(), generate() or
   * prompt() on this session; that call then throws RingLmException (RLM_ERR_CANCELLED) within
   * one layer of the model, and the session stays usable at its last committed position. No
   * effect on later calls when nothing runs. Not concurrently with close().
   */
  public void cancel() {
    NativeBridge.cancel(h());
  }

  /** Position 0, nothing pending; stops and sampling kept. */
  public void reset() {
    NativeBridge.sessionReset(h());
  }

  /** rlm_session_release; the session is unusable afterwards. Idempotent. */
  @Override
  public void close() {
    if (handle != 0) {
      long h = handle;
      handle = 0;
      NativeBridge.sessionRelease(h);
    }
  }
}
