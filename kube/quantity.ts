/** Kubernetes resource quantities (`500m`, `2`, `128Mi`, `1G`, `1e3`) as numbers of base units (cores, bytes). */

const SUFFIXES: Record<string, number> = {
  m: 1e-3,
  '': 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

/** A quantity in base units, or undefined when it is not one. */
export function quantityValue(text: string): number | undefined {
  const match = /^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$/.exec(text.trim());
  if (!match || !Object.hasOwn(SUFFIXES, match[2]!)) return undefined;
  return Number(match[1]) * SUFFIXES[match[2]!]!;
}

/** A quantity in base units (absent is 0), refused as the API server words it when it is not one. */
export function parseQuantity(text: string | number | undefined): number {
  if (text === undefined) return 0;
  if (typeof text === 'number') return text;
  const value = quantityValue(text);
  if (value === undefined)
    throw new Error(`quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': ${text}`);
  return value;
}
