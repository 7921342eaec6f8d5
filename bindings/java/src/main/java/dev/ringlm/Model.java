package dev.ringlm;

import java.io.File;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;

/**
 * A verified model: a view over model bytes that stay where they are (a memory-mapped file or a
 * direct buffer). Opening copies nothing and allocates no native memory: the runtime's rlm_model
 * storage is a small direct buffer owned by this object.
 *
 * <p>Any number of {@link Session}s may use one model, from different threads (one thread per
 * session). A session keeps its model (and so the mapping) reachable.
 */
public final class Model implements AutoCloseable {
  private final ByteBuffer bytes;   // the model file; kept reachable: the runtime points into it
  private final ByteBuffer storage; // rlm_model (caller storage of the C ABI), 64-aligned
  private volatile boolean closed;

  private Model(ByteBuffer bytes, ByteBuffer storage) {
    this.bytes = bytes;
    this.storage = storage;
  }

  /**
   * Memory-maps the file read-only (FileChannel.map: page-aligned, so 64-aligned as the runtime
   * requires) and opens it. The mapping lives as long as this model and its sessions are
   * reachable. Files over 2 GiB do not fit one MappedByteBuffer and are refused.
   */
  public static Model open(String path) throws IOException {
    return open(new File(path));
  }

  public static Model open(File file) throws IOException {
    try (RandomAccessFile raf = new RandomAccessFile(file, "r");
        FileChannel ch = raf.getChannel()) {
      long size = ch.size();
      if (size > Integer.MAX_VALUE) {
        throw new IOException(file + ": " + size + " bytes; the Java API maps at most 2 GiB");
      }
      MappedByteBuffer map = ch.map(FileChannel.MapMode.READ_ONLY, 0, size);
      return open(map); // the mapping stays valid after the channel closes
    }
  }

  /**
   * Opens model bytes already in a direct buffer (from position to limit), e.g. a mapped asset
   * or a buffer filled by the app. The first byte must be 64-byte aligned, otherwise
   * RLM_ERR_MODEL_ALIGNMENT. The buffer must not change while the model is in use.
   */
  public static Model open(ByteBuffer direct) {
    NativeBridge.load();
    if (direct == null || !direct.isDirect()) {
      throw new IllegalArgumentException("Model.open needs a direct ByteBuffer (mapped or allocateDirect)");
    }
    ByteBuffer bytes = direct.slice();
    long addr = NativeBridge.address(bytes);
    if (addr % 64 != 0) {
      throw new RingLmException(28, NativeBridge.statusString(28),
          "model bytes at address 0x" + Long.toHexString(addr) + " are not 64-byte aligned");
    }
    ByteBuffer storage = Memory.alignedDirect(NativeBridge.modelStorageBytes(), 64);
    NativeBridge.modelOpen(bytes, bytes.capacity(), storage);
    return new Model(bytes, storage);
  }

  /** Hyperparameters and sizes. */
  public ModelInfo info() {
    long[] v = new long[NativeBridge.INFO_COUNT];
    NativeBridge.modelInfo(storage(), v);
    return new ModelInfo(v);
  }

  /** Size of the model bytes. */
  public long sizeBytes() {
    return bytes.capacity();
  }

  /** Bytes a session with this config needs (the runtime's part; see Session.memoryBytes). */
  public long sessionMemory(SessionConfig config) {
    long[] align = new long[1];
    return NativeBridge.sessionMemory(storage(), config.toArray(), align);
  }

  /**
   * No new sessions after this. Sessions already created keep working (they hold this model);
   * the mapping is released by the garbage collector once nothing references it.
   */
  @Override
  public void close() {
    closed = true;
  }

  ByteBuffer storage() {
    if (closed) throw new IllegalStateException("model closed");
    return storage;
  }
}
