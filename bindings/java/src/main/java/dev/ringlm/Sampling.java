package dev.ringlm;

/**
 * Sampling parameters (rlm_sampling); defaults are the runtime's (rlm_sampling_default). Stage
 * order: penalties, temperature (0 = greedy), top-k, softmax, top-p, min-p, draw.
 */
public final class Sampling {
  public float temperature;
  public int topK;
  public float topP;
  public float minP;
  public float repeatPenalty;
  public float frequencyPenalty;
  public float presencePenalty;
  public int penaltyLastN;
  public long seed;

  public Sampling() {
    NativeBridge.load();
    float[] f = new float[NativeBridge.SF_COUNT];
    int[] i = new int[NativeBridge.SI_COUNT];
    long[] s = new long[1];
    NativeBridge.samplingDefaults(f, i, s);
    temperature = f[NativeBridge.SF_TEMPERATURE];
    topP = f[NativeBridge.SF_TOP_P];
    minP = f[NativeBridge.SF_MIN_P];
    repeatPenalty = f[NativeBridge.SF_REPEAT_PENALTY];
    frequencyPenalty = f[NativeBridge.SF_FREQUENCY_PENALTY];
    presencePenalty = f[NativeBridge.SF_PRESENCE_PENALTY];
    topK = i[NativeBridge.SI_TOP_K];
    penaltyLastN = i[NativeBridge.SI_PENALTY_LAST_N];
    seed = s[0];
  }

  /** Temperature 0: argmax, lowest id on ties. */
  public static Sampling greedy() {
    Sampling s = new Sampling();
    s.temperature = 0f;
    return s;
  }

  float[] floats() {
    float[] f = new float[NativeBridge.SF_COUNT];
    f[NativeBridge.SF_TEMPERATURE] = temperature;
    f[NativeBridge.SF_TOP_P] = topP;
    f[NativeBridge.SF_MIN_P] = minP;
    f[NativeBridge.SF_REPEAT_PENALTY] = repeatPenalty;
    f[NativeBridge.SF_FREQUENCY_PENALTY] = frequencyPenalty;
    f[NativeBridge.SF_PRESENCE_PENALTY] = presencePenalty;
    return f;
  }

  int[] ints() {
    int[] i = new int[NativeBridge.SI_COUNT];
    i[NativeBridge.SI_TOP_K] = topK;
    i[NativeBridge.SI_PENALTY_LAST_N] = penaltyLastN;
    return i;
  }
}
