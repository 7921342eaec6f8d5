package dev.ringlm;

/** One step's outcome (an immutable value; see {@link Session#step()}). */
public final class StepResult {
  /** The sampled token id. */
  public final int token;
  /** Absolute position the sampled token occupies. */
  public final int position;
  /** The text this step releases: complete UTF-8 characters, never part of a stop string. */
  public final String text;
  /** NONE while the turn goes on. */
  public final StopReason stop;
  /** Tokens run through the model by this step (the prompt length on the first step). */
  public final int evaluated;

  StepResult(int token, int position, String text, StopReason stop, int evaluated) {
    this.token = token;
    this.position = position;
    this.text = text;
    this.stop = stop;
    this.evaluated = evaluated;
  }

  /** True when the turn ended. */
  public boolean done() {
    return stop != StopReason.NONE;
  }

  @Override
  public String toString() {
    return "StepResult{token=" + token + ", position=" + position + ", text=\"" + text
        + "\", stop=" + stop + ", evaluated=" + evaluated + "}";
  }
}
