import type { Transform } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { compileMasker, createMaskingTransform } from '../../egress-proxy/secret-masking.js';
import {
  MissingSecretError,
  SecretPlacementError,
  createSubstitutionTransform,
  substituteHeaderValue,
  substituteTarget,
} from '../../egress-proxy/secret-substitution.js';

/** Feeds `chunks` through `transform` and collects everything it emits. */
async function through(transform: Transform, chunks: Buffer[]): Promise<Buffer> {
  const out: Buffer[] = [];
  transform.on('data', (chunk: Buffer) => out.push(chunk));
  const done = new Promise<void>((resolve, reject) => {
    transform.once('end', resolve);
    transform.once('error', reject);
  });
  for (const chunk of chunks) transform.write(chunk);
  transform.end();
  await done;
  return Buffer.concat(out);
}

/** Every way to cut `input` in two, plus one byte at a time. */
function splits(input: string): Buffer[][] {
  const bytes = Buffer.from(input);
  const result: Buffer[][] = [];
  for (let at = 0; at <= bytes.length; at++) result.push([bytes.subarray(0, at), bytes.subarray(at)]);
  result.push([...bytes].map((b) => Buffer.from([b])));
  return result;
}

const values = new Map([
  ['API_KEY', 'sk-live-123'],
  ['DB_PASS', 'pä$$ wörd ✓'],
  ['EMPTY', ''],
]);

describe('createSubstitutionTransform(values)', () => {
  it('replaces several placeholders, whatever the chunk boundaries', async () => {
    const input = 'Authorization: {{secret:API_KEY}}\n{"p":"{{secret:DB_PASS}}","k":"{{secret:API_KEY}}{{secret:EMPTY}}"}';
    for (const chunks of splits(input)) {
      const out = await through(createSubstitutionTransform(values), chunks);
      expect(out.toString()).toBe('Authorization: sk-live-123\n{"p":"pä$$ wörd ✓","k":"sk-live-123"}');
    }
  });

  it('passes text that only looks like a placeholder through unchanged', async () => {
    const longAlias = `A${'B'.repeat(64)}`; // 65 characters: one too many
    const input = `{{secret:lower}} {{secret:}} {{ secret:API_KEY}} {{secret:${longAlias}}} {{secret:API_KEY} {{secret:API-KEY}} tail {{secret:API_KEY`;
    for (const chunks of splits(input)) {
      expect((await through(createSubstitutionTransform(values), chunks)).toString()).toBe(input);
    }
  });

  it('finds a placeholder right after a near miss, and takes the longest alias allowed', async () => {
    const alias64 = `Z${'9'.repeat(63)}`;
    const withLong = new Map([...values, [alias64, 'long-one']]);
    const input = `{{{secret:API_KEY}} {{secret:{{secret:API_KEY}} {{secret:${alias64}}}`;
    for (const chunks of splits(input)) {
      const out = await through(createSubstitutionTransform(withLong), chunks);
      expect(out.toString()).toBe('{sk-live-123 {{secret:sk-live-123 long-one');
    }
  });

  it('does not rescan a substituted value, so placeholder-like values go out verbatim', async () => {
    const tricky = new Map([
      ['OUTER', '{{secret:INNER}}'],
      ['INNER', 'must-not-appear'],
      ['HALF', '{{secret:'],
    ]);
    for (const chunks of splits('[{{secret:OUTER}}][{{secret:HALF}}INNER}}]')) {
      const out = await through(createSubstitutionTransform(tricky), chunks);
      expect(out.toString()).toBe('[{{secret:INNER}}][{{secret:INNER}}]');
    }
  });

  it('fails with MissingSecretError naming an alias the run lacks, at every split', async () => {
    for (const chunks of splits('ok {{secret:API_KEY}} then {{secret:NOT_VAULTED}} more')) {
      const error = await through(createSubstitutionTransform(values), chunks).catch((err: unknown) => err);
      expect(error).toBeInstanceOf(MissingSecretError);
      expect((error as MissingSecretError).alias).toBe('NOT_VAULTED');
    }
  });

  it('holds back only what could still become a placeholder', async () => {
    const transform = createSubstitutionTransform(values);
    const seen: string[] = [];
    transform.on('data', (chunk: Buffer) => seen.push(chunk.toString()));
    transform.write('plain text, ');
    transform.write('then {{sec');
    await new Promise((resolve) => setImmediate(resolve));
    expect(seen.join('')).toBe('plain text, then ');
    transform.end('ret:API_KEY}}!');
    await new Promise((resolve) => transform.once('end', resolve));
    expect(seen.join('')).toBe('plain text, then sk-live-123!');
  });
});

describe('createMaskingTransform(compileMasker(values))', () => {
  const mask = async (secrets: Map<string, string>, chunks: Buffer[]) => {
    const masker = compileMasker(secrets);
    if (!masker) throw new Error('no values to mask');
    return (await through(createMaskingTransform(masker), chunks)).toString();
  };

  it('masks every value back into its placeholder, whatever the chunk boundaries', async () => {
    const input = '{"echo":"Bearer sk-live-123","pw":"pä$$ wörd ✓","again":"sk-live-123sk-live-123"}';
    for (const chunks of splits(input)) {
      expect(await mask(values, chunks)).toBe(
        '{"echo":"Bearer {{secret:API_KEY}}","pw":"{{secret:DB_PASS}}","again":"{{secret:API_KEY}}{{secret:API_KEY}}"}',
      );
    }
  });

  it('prefers the earliest, then the longest, value even when a shorter one completes first in a chunk', async () => {
    const nested = new Map([
      ['LONG', 'abcdef'],
      ['SHORT', 'cd'],
    ]);
    for (const chunks of splits('xxabcdefyy cd abcdx')) {
      expect(await mask(nested, chunks)).toBe('xx{{secret:LONG}}yy {{secret:SHORT}} ab{{secret:SHORT}}x');
    }
  });

  it('never masks inside a placeholder it wrote', async () => {
    // The placeholder for TOKEN contains "secret", which is the value of WORD.
    const overlapping = new Map([
      ['TOKEN', 'tok-123'],
      ['WORD', 'secret'],
    ]);
    for (const chunks of splits('tok-123 / secret')) {
      expect(await mask(overlapping, chunks)).toBe('{{secret:TOKEN}} / {{secret:WORD}}');
    }
  });

  it('masks values that contain placeholder-like text, and the percent-encoded and JSON-escaped forms', async () => {
    const odd = new Map([
      ['LOOKS_LIKE', '{{secret:OTHER}}'],
      ['QUOTED', 'a "b" c/d'],
    ]);
    const input = '{{secret:OTHER}} | a%20%22b%22%20c%2Fd | "a \\"b\\" c/d" | a "b" c/d';
    for (const chunks of splits(input)) {
      expect(await mask(odd, chunks)).toBe('{{secret:LOOKS_LIKE}} | {{secret:QUOTED}} | "{{secret:QUOTED}}" | {{secret:QUOTED}}');
    }
  });

  it('ignores empty values and gives a value shared by two aliases the first alias', async () => {
    const shared = new Map([
      ['ZED', 'same-value'],
      ['ALPHA', 'same-value'],
      ['NONE', ''],
    ]);
    expect(await mask(shared, [Buffer.from('x same-value y')])).toBe('x {{secret:ALPHA}} y');
    expect(compileMasker(new Map([['NONE', '']]))).toBeUndefined();
  });
});

describe('substituteTarget(target, values)', () => {
  it('substitutes literal and percent-encoded placeholders, percent-encoding the value', () => {
    expect(substituteTarget('/v1/{{secret:DB_PASS}}?key=%7B%7Bsecret:API_KEY%7d%7D&x={{secret%3AAPI_KEY}}', values)).toBe(
      `/v1/${encodeURIComponent('pä$$ wörd ✓')}?key=sk-live-123&x=sk-live-123`,
    );
  });

  it('throws MissingSecretError for an alias the run lacks', () => {
    expect(() => substituteTarget('/x?k=%7B%7Bsecret:GONE%7D%7D', values)).toThrow(MissingSecretError);
  });
});

describe('substituteHeaderValue(value, values)', () => {
  it('writes the UTF-8 bytes of the value (headers are latin1 strings in Node)', () => {
    const header = substituteHeaderValue('Basic {{secret:DB_PASS}}', values);
    expect(Buffer.from(header, 'latin1').toString('utf8')).toBe('Basic pä$$ wörd ✓');
  });

  it('refuses a value that would break out of the header', () => {
    const injecting = new Map([['EVIL', 'x\r\nX-Injected: 1']]);
    expect(() => substituteHeaderValue('{{secret:EVIL}}', injecting)).toThrow(SecretPlacementError);
  });
});

describe('compileMasker(values).maskHeaderValue(value)', () => {
  it('masks values in a header string in one pass', () => {
    const masker = compileMasker(
      new Map([
        ['TOKEN', 'tok-123'],
        ['WORD', 'secret'],
      ]),
    )!;
    expect(masker.maskHeaderValue('session=tok-123; secret')).toBe('session={{secret:TOKEN}}; {{secret:WORD}}');
  });
});
