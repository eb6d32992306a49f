/** Summaries of the bench's samples: nearest-rank percentiles, as every plane reports them. */

/** Nearest-rank percentile of values already sorted ascending; null when there are none. */
export function nearestRank(sorted: readonly number[], q: number): number | null {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

/** Nearest-rank percentile of values in any order; null when there are none. */
export function percentile(values: readonly number[], q: number): number | null {
  return nearestRank(
    [...values].sort((a, b) => a - b),
    q,
  );
}

/** The lower median (a sample, never an average of two): null when there are none. */
export function median(values: readonly number[]): number | null {
  return percentile(values, 0.5);
}
