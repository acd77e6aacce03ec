/** The factor of q·k in pagedAttention (its contract's `scale`): the one given, else 1 / sqrt(headDim). */
export function attentionScale(scale: number | undefined, headDim: number): number {
  return scale ?? 1 / Math.sqrt(headDim);
}
