package dev.ringlm;

/** Hyperparameters of an opened model (rlm_model_info). */
public final class ModelInfo {
  public final int layers, dim, heads, kvHeads, headDim, ffnDim, vocabSize, maxContext;
  public final int bosId, eosId, tensors;
  public final long weightBytes;

  ModelInfo(long[] v) {
    layers = (int) v[0];
    dim = (int) v[1];
    heads = (int) v[2];
    kvHeads = (int) v[3];
    headDim = (int) v[4];
    ffnDim = (int) v[5];
    vocabSize = (int) v[6];
    maxContext = (int) v[7];
    bosId = (int) v[8];
    eosId = (int) v[9];
    tensors = (int) v[10];
    weightBytes = v[11];
  }

  @Override
  public String toString() {
    return "ModelInfo{layers=" + layers + ", dim=" + dim + ", heads=" + heads + ", kvHeads="
        + kvHeads + ", ffnDim=" + ffnDim + ", vocabSize=" + vocabSize + ", maxContext="
        + maxContext + ", weightBytes=" + weightBytes + "}";
  }
}
