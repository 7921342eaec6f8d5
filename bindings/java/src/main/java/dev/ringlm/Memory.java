package dev.ringlm;

import java.nio.Buffer;
import java.nio.ByteBuffer;

/** Aligned direct buffers: allocateDirect(size + align - 1) and a slice at the aligned address. */
final class Memory {
  private Memory() {}

  static ByteBuffer alignedDirect(long size, int align) {
    if (size < 0 || size + align - 1 > Integer.MAX_VALUE) {
      throw new IllegalArgumentException("direct buffer of " + size + " bytes is over 2 GiB");
    }
    ByteBuffer raw = ByteBuffer.allocateDirect((int) (size + align - 1));
    return alignedSlice(raw, size, align);
  }

  /** [aligned start, + size) of a direct buffer (the slice keeps `raw` reachable). */
  static ByteBuffer alignedSlice(ByteBuffer raw, long size, int align) {
    long addr = NativeBridge.address(raw);
    if (addr < 0) throw new IllegalArgumentException("not a direct ByteBuffer");
    int pad = (int) ((align - (addr % align)) % align);
    if (pad + size > raw.capacity()) {
      throw new IllegalArgumentException("buffer of " + raw.capacity() + " bytes cannot hold "
          + size + " bytes aligned to " + align);
    }
    ByteBuffer dup = raw.duplicate();
    ((Buffer) dup).limit((int) (pad + size));
    ((Buffer) dup).position(pad);
    return dup.slice();
  }
}
