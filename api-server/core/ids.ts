import { randomFillSync } from 'node:crypto';

/** Every id prefix of the spec, in one place. */
export const ID_PREFIX = {
  tenant: 'tnt',
  user: 'usr',
  role: 'rol',
  repository: 'rep',
  skill: 'skl',
  credential: 'crd',
  conversation: 'con',
  message: 'msg',
  approval: 'apr',
  approverKey: 'apk',
  request: 'req',
  integration: 'int',
  serviceKey: 'key',
} as const;

export type IdKind = keyof typeof ID_PREFIX;

// Crockford base32: digits then upper-case letters, so byte order equals time order.
const ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
const TIME_CHARS = 10; // 48 bits of milliseconds
const RANDOM_CHARS = 16; // 80 bits

export type IdGenerator = (kind: IdKind) => string;

/**
 * Time-ordered ids (ULID layout): keyset pagination by id is then stable and newest-first is a
 * plain descending sort. Within one millisecond the random part is incremented, so ids made by
 * one process are strictly increasing.
 */
export function createIdGenerator(now: () => number = Date.now): IdGenerator {
  let lastTime = -1;
  // The time part is encoded once per millisecond: several ids share it under load.
  let lastTimeText = '';
  let lastRandom: number[] = [];
  const random = randomPool();
  return (kind) => {
    const time = now();
    if (time <= lastTime) {
      incrementBase32(lastRandom);
    } else {
      lastTime = time;
      lastTimeText = encodeTime(time);
      lastRandom = random(RANDOM_CHARS);
    }
    let text = `${ID_PREFIX[kind]}_${lastTimeText}`;
    for (const digit of lastRandom) text += ALPHABET[digit];
    return text;
  };
}

/**
 * Random base32 digits drawn from a buffer filled 4 KiB at a time: one `randomBytes` call per id
 * was a system call and a buffer per request.
 */
function randomPool(): (count: number) => number[] {
  const pool = Buffer.alloc(4096);
  let offset = pool.length;
  return (count) => {
    if (offset + count > pool.length) {
      randomFillSync(pool);
      offset = 0;
    }
    const digits = new Array<number>(count);
    for (let i = 0; i < count; i++) digits[i] = pool[offset + i]! & 31;
    offset += count;
    return digits;
  };
}

function encodeTime(time: number): string {
  let out = '';
  let rest = time;
  for (let i = 0; i < TIME_CHARS; i++) {
    out = ALPHABET[rest % 32] + out;
    rest = Math.floor(rest / 32);
  }
  return out;
}

function incrementBase32(digits: number[]): void {
  for (let i = digits.length - 1; i >= 0; i--) {
    if (digits[i]! < 31) {
      digits[i]!++;
      return;
    }
    digits[i] = 0;
  }
}

const ID_PATTERNS = Object.fromEntries(
  Object.entries(ID_PREFIX).map(([kind, prefix]) => [kind, new RegExp(`^${prefix}_[A-Za-z0-9]{1,64}$`)]),
) as Record<IdKind, RegExp>;

/** The shape of an id of `kind`: its prefix, `_`, then letters and digits. */
export function idPattern(kind: IdKind): RegExp {
  return ID_PATTERNS[kind];
}

/** True when `value` has the shape of an id of `kind` (cheap pre-check before a lookup). */
export function isId(kind: IdKind, value: string): boolean {
  return ID_PATTERNS[kind].test(value);
}
