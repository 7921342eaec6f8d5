package dev.ringlm;

import java.io.ByteArrayOutputStream;
import java.io.File;
import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;

/**
 * Plain-Java test of the JNI binding (no JUnit needed), run by CTest:
 *   java -Djava.library.path=DIR -cp CLASSES dev.ringlm.RingLmTest SHARED_DIR "RINGLM_CMD" TMP_DIR
 * Converts stories260K with the built `ringlm convert`, generates greedily and compares with
 * llama2.c's reference. Exit 0 = all passed, 1 = a failure, 77 = skipped (no shared data).
 */
public final class RingLmTest {
  private static int passed = 0;
  private static int failed = 0;

  private static void check(boolean ok, String what) {
    if (ok) {
      ++passed;
    } else {
      ++failed;
      System.out.println("FAILED: " + what);
    }
  }

  private static void checkEquals(Object expected, Object got, String what) {
    boolean ok = expected == null ? got == null : expected.equals(got);
    check(ok, what + "\n  expected: " + expected + "\n       got: " + got);
  }

  interface Body {
    void run() throws Exception;
  }

  private static void expectThrows(String status, String what, Body body) {
    try {
      body.run();
      check(false, what + ": no exception");
    } catch (RingLmException e) {
      checkEquals(status, e.status(), what + " (" + e.getMessage() + ")");
    } catch (Exception e) {
      check(status == null, what + ": " + e);
    }
  }

  public static void main(String[] args) throws Exception {
    if (args.length < 3) {
      System.err.println("usage: RingLmTest SHARED_DIR RINGLM_CMD TMP_DIR");
      System.exit(2);
    }
    File bin = new File(args[0], "models/stories260K/stories260K.bin");
    File tok = new File(args[0], "models/stories260K/tok512.bin");
    File ref = new File(args[0], "references/stories260K/once-upon-a-time.greedy.txt");
    if (!bin.isFile() || !tok.isFile() || !ref.isFile()) {
      System.out.println("SKIPPED: " + bin + " not found");
      System.exit(77);
    }
    File dir = new File(args[2]);
    dir.mkdirs();
    File model = new File(dir, "stories260K-f32-java.rlm");
    String cmd = args[1] + " convert '" + bin + "' --tokenizer '" + tok + "' --quant f32 -o '"
        + model + "' >/dev/null 2>&1";
    Process p = new ProcessBuilder("sh", "-c", cmd).inheritIO().start();
    if (p.waitFor() != 0) {
      System.out.println("FAILED: convert: " + cmd);
      System.exit(1);
    }

    String reference = new String(Files.readAllBytes(ref.toPath()), StandardCharsets.UTF_8);
    while (reference.endsWith("\n")) reference = reference.substring(0, reference.length() - 1);
    check(reference.startsWith("Once upon a time"), "reference starts with the prompt");
    String expected = reference.substring("Once upon a time".length());

    try (Model m = Model.open(model.getPath())) {
      ModelInfo info = m.info();
      checkEquals(512, info.vocabSize, "vocab size");
      checkEquals(5, info.layers, "layers");

      // 1. generate(): greedy, llama2.c ran 256 positions (BOS + prompt + continuation).
      SessionConfig cfg = new SessionConfig();
      try (Session s = Session.create(m, cfg)) {
        s.setSampling(Sampling.greedy());
        final StringBuilder sb = new StringBuilder();
        StopReason why = s.generate("Once upon a time", 0, new java.util.function.Consumer<String>() {
          int steps = 0;

          @Override
          public void accept(String t) {
            sb.append(t);
            // After the first step the prompt is in; stop where llama2.c's 256 steps stopped.
            if (++steps == 1) s.setMaxTokens(256 - s.position() + 1);
          }
        });
        System.out.println("generate: stop=" + why + ", position=" + s.position() + ", "
            + sb.length() + " chars");
        checkEquals(expected, sb.toString(), "generate() text == llama2.c reference continuation");
        checkEquals(StopReason.MAX_TOKENS, why, "stop reason");

        // 2. step(): the same text again after reset (a cancel while nothing runs changes
        // nothing).
        s.cancel();
        s.reset();
        s.setMaxTokens(300);
        s.prompt("Once upon a time");
        StringBuilder sb2 = new StringBuilder(4096);
        StepResult r;
        com.sun.management.ThreadMXBean mx0 =
            (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
        long tid0 = Thread.currentThread().getId();
        long maxStep = 0;
        int n2 = 0;
        mx0.getThreadAllocatedBytes(tid0);
        do {
          long before = mx0.getThreadAllocatedBytes(tid0);
          r = s.step();
          long delta = mx0.getThreadAllocatedBytes(tid0) - before;
          if (n2++ > 0) maxStep = Math.max(maxStep, delta);
          sb2.append(r.text);
        } while (!r.done() && sb2.length() < expected.length());
        check(sb2.toString().startsWith(expected), "step() text starts with the reference");
        System.out.println("step: max Java bytes allocated in one step (String + StepResult): "
            + maxStep);

        // 3. stepInto(): no Java allocation per step; the same bytes.
        s.reset();
        s.setMaxTokens(300);
        s.prompt("Once upon a time");
        ByteBuffer out = ByteBuffer.allocateDirect(s.stepTextCapacity() * 4);
        ByteArrayOutputStream all = new ByteArrayOutputStream();
        byte[] copy = new byte[out.capacity()];
        com.sun.management.ThreadMXBean mx =
            (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
        long tid = Thread.currentThread().getId();
        long maxDelta = 0;
        int steps = 0;
        mx.getThreadAllocatedBytes(tid);
        for (;;) {
          out.clear();
          long before = mx.getThreadAllocatedBytes(tid);
          int n = s.stepInto(out);
          StopReason stop = s.lastStop();
          long delta = mx.getThreadAllocatedBytes(tid) - before;
          if (steps > 0) maxDelta = Math.max(maxDelta, delta); // the first may load classes
          ++steps;
          out.flip();
          out.get(copy, 0, n);
          all.write(copy, 0, n);
          if (stop != StopReason.NONE || all.size() >= expected.length() + 16) break;
        }
        String got3 = new String(all.toByteArray(), StandardCharsets.UTF_8);
        check(got3.startsWith(expected), "stepInto() bytes start with the reference");
        System.out.println("stepInto: " + steps + " steps, max Java bytes allocated in one step: "
            + maxDelta);
        checkEquals(0L, maxDelta, "stepInto allocates no Java object");

        // 3b. prompt(text, flags): ordinary text is the same tokens either way (stories260K's
        // SentencePiece vocabulary has no special piece text can spell; the byte-level case is
        // tests/test_cli_flags.cc); unknown flag bits are refused.
        s.reset();
        s.prompt("Once upon a time", 0);
        s.step();
        final int plain = s.position();
        s.reset();
        s.prompt("Once upon a time", Session.PARSE_SPECIALS);
        s.step();
        checkEquals(plain, s.position(), "prompt(text, 0) and prompt(text, PARSE_SPECIALS) on plain text");
        s.reset();
        expectThrows("RLM_ERR_INVALID_ARGUMENT", "prompt with unknown flags",
            () -> s.prompt("Once", 0x100));

        // 4. Stop string: never released.
        s.reset();
        s.addStopString("Lily");
        StringBuilder sb4 = new StringBuilder();
        StopReason why4 = s.generate("Once upon a time", 200, sb4::append);
        checkEquals(StopReason.STOP_STRING, why4, "stop-string reason");
        checkEquals(", there was a little girl named ", sb4.toString(), "text before the stop string");
        s.clearStops();

        // 5. Errors carry the status name.
        expectThrows("RLM_ERR_TOKEN_OUT_OF_RANGE", "feed token 100000",
            () -> s.promptTokens(new int[] {100000}));
        expectThrows("RLM_ERR_INVALID_ARGUMENT", "rewind past the end", () -> s.rewind(1 << 20));
      }
      // Closed session.
      Session closed = Session.create(m);
      closed.close();
      closed.close();
      expectThrows(null, "step after close", closed::step);

      // Caller-provided session memory (any address; aligned inside).
      ByteBuffer mem = ByteBuffer.allocateDirect((int) Session.memoryBytes(m, cfg) + 7);
      mem.position(7);
      try (Session s = Session.create(m, cfg, mem.slice())) {
        s.setSampling(Sampling.greedy());
        StringBuilder sb = new StringBuilder();
        s.generate("Once upon a time", 10, sb::append);
        check(expected.startsWith(sb.toString()) && sb.length() > 0, "caller memory session");
      }
      // Too small caller memory.
      expectThrows("RLM_ERR_BUFFER_TOO_SMALL", "session memory one byte short", () -> {
        long need = m.sessionMemory(cfg);
        ByteBuffer small = ByteBuffer.allocateDirect((int) need + 63);
        ByteBuffer aligned = Memory.alignedSlice(small, need - 1, 64);
        NativeBridge.sessionInit(m.storage(), cfg.toArray(), aligned, need - 1);
      });
    }

    // Model errors.
    byte[] file = Files.readAllBytes(model.toPath());
    ByteBuffer raw = ByteBuffer.allocateDirect(file.length + 64);
    ByteBuffer aligned = Memory.alignedSlice(raw, file.length, 64);
    aligned.put(file);
    aligned.clear();
    try (Model m2 = Model.open(aligned)) {
      checkEquals(512, m2.info().vocabSize, "Model.open(direct buffer)");
    }
    ByteBuffer shifted = Memory.alignedSlice(ByteBuffer.allocateDirect(file.length + 128),
        file.length + 1, 64);
    shifted.position(1);
    shifted.put(file);
    shifted.position(1);
    expectThrows("RLM_ERR_MODEL_ALIGNMENT", "misaligned model bytes", () -> Model.open(shifted));
    ByteBuffer truncated = aligned.duplicate();
    truncated.limit(100);
    expectThrows("RLM_ERR_MODEL_TRUNCATED", "truncated model", () -> Model.open(truncated));
    ByteBuffer garbage = Memory.alignedDirect(4096, 64);
    for (int i = 0; i < 4096; ++i) garbage.put(i, (byte) 0x5a);
    RingLmException e = null;
    try {
      Model.open(garbage);
    } catch (RingLmException x) {
      e = x;
    }
    check(e != null && e.status().startsWith("RLM_ERR_MODEL_"), "garbage model: " + e);
    expectThrows(null, "heap buffer refused", () -> Model.open(ByteBuffer.allocate(64)));
    model.delete();

    System.out.println("RingLmTest: " + passed + " passed, " + failed + " failed");
    System.exit(failed == 0 ? 0 : 1);
  }
}
