/** The bench's settings from the environment: a clear error instead of a run with a nonsense value. */

/** A whole number of at least `min`; `fallback` when unset or empty. */
export function envCount(name: string, fallback: number, min = 1): number {
  const value = envValue(name, fallback);
  if (!Number.isInteger(value) || value < min) throw new Error(`${name} must be a whole number of at least ${min}`);
  return value;
}

/** A finite number of at least `min` (seconds, rates); `fallback` when unset or empty. */
export function envNumber(name: string, fallback: number, min = 0): number {
  const value = envValue(name, fallback);
  if (!Number.isFinite(value) || value < min) throw new Error(`${name} must be a number of at least ${min}`);
  return value;
}

function envValue(name: string, fallback: number): number {
  const raw = process.env[name];
  return raw === undefined || raw === '' ? fallback : Number(raw);
}
