import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  constantTimeEqual,
  createVault,
  hashServiceKey,
  loadMasterKey,
  parseMasterKey,
  randomToken,
} from '../../api-server/core/crypto.js';

const key = () => randomBytes(32);

describe('vault', () => {
  it('round-trips values, including empty and non-ASCII ones', () => {
    const vault = createVault(key());
    for (const value of ['ghp_secret-token', '', 'ünïcødé ✓ 🔑', 'x'.repeat(10_000)]) {
      const sealed = vault.encrypt(value, 'credential:crd_1');
      expect(vault.decrypt(sealed, 'credential:crd_1')).toBe(value);
    }
  });

  it('never carries the plaintext and uses a fresh IV each time', () => {
    const vault = createVault(key());
    const a = vault.encrypt('super-secret-value', 'ctx');
    const b = vault.encrypt('super-secret-value', 'ctx');
    expect(a).toMatch(/^v1\.[0-9a-f]{8}\.[A-Za-z0-9_-]+$/);
    expect(a).not.toContain('super-secret-value');
    expect(Buffer.from(a.split('.')[2]!, 'base64url').toString('latin1')).not.toContain('super-secret');
    expect(a).not.toBe(b);
  });

  it('binds the context: a ciphertext moved to another context does not decrypt', () => {
    const vault = createVault(key());
    const sealed = vault.encrypt('value', 'approver_key:apk_1');
    expect(() => vault.decrypt(sealed, 'approver_key:apk_2')).toThrow();
    expect(() => vault.decrypt(sealed, '')).toThrow();
  });

  it('rejects tampered ciphertexts (data, tag or iv) and foreign formats', () => {
    const vault = createVault(key());
    const sealed = vault.encrypt('value to protect', 'ctx');
    const [version, id, payload] = sealed.split('.') as [string, string, string];
    const raw = Buffer.from(payload, 'base64url');
    for (const offset of [0, 12, raw.length - 1]) {
      const flipped = Buffer.from(raw);
      flipped[offset]! ^= 0x01;
      expect(() => vault.decrypt(`${version}.${id}.${flipped.toString('base64url')}`, 'ctx'), `offset ${offset}`).toThrow();
    }
    expect(() => vault.decrypt(`${version}.${id}.${raw.subarray(0, raw.length - 1).toString('base64url')}`, 'ctx')).toThrow();
    expect(() => vault.decrypt(`v2.${id}.${payload}`, 'ctx')).toThrow();
    expect(() => vault.decrypt('not a ciphertext', 'ctx')).toThrow();
  });

  it('does not decrypt with another master key', () => {
    const sealed = createVault(key()).encrypt('value', 'ctx');
    expect(() => createVault(key()).decrypt(sealed, 'ctx')).toThrow(/unknown key/);
  });

  it('after rotation, reads old values through the previous key and writes under the new one', () => {
    const oldKey = key();
    const newKey = key();
    const old = createVault(oldKey).encrypt('written before rotation', 'crd_1');
    const rotated = createVault(newKey, [oldKey]);
    expect(rotated.decrypt(old, 'crd_1')).toBe('written before rotation');
    const fresh = rotated.encrypt('written after rotation', 'crd_2');
    expect(fresh.split('.')[1]).not.toBe(old.split('.')[1]);
    expect(createVault(newKey).decrypt(fresh, 'crd_2')).toBe('written after rotation');
    expect(() => createVault(oldKey).decrypt(fresh, 'crd_2')).toThrow();
    // Without the previous key the old value is unreadable: rotation needs it listed.
    expect(() => createVault(newKey).decrypt(old, 'crd_1')).toThrow();
  });

  it('derives stable 32-byte keys per purpose and per master key', () => {
    const master = key();
    const vault = createVault(master);
    const jwt = vault.deriveKey('platform-jwt');
    expect(jwt).toHaveLength(32);
    expect(createVault(Buffer.from(master)).deriveKey('platform-jwt').equals(jwt)).toBe(true);
    expect(vault.deriveKey('other').equals(jwt)).toBe(false);
    expect(createVault(key()).deriveKey('platform-jwt').equals(jwt)).toBe(false);
    expect(jwt.equals(master)).toBe(false);
  });
});

describe('master key', () => {
  let dir: string | undefined;
  afterEach(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
    dir = undefined;
  });

  it('parses base64 of exactly 32 bytes', () => {
    const raw = key();
    expect(parseMasterKey(raw.toString('base64')).equals(raw)).toBe(true);
    expect(() => parseMasterKey(randomBytes(16).toString('base64'))).toThrow(/32 bytes/);
    expect(() => parseMasterKey(randomBytes(33).toString('base64'))).toThrow(/32 bytes/);
  });

  it('prefers the configured key and otherwise generates one into the data dir (0600), reused later', async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'acis-key-'));
    const configured = key();
    expect((await loadMasterKey(configured.toString('base64'), dir)).equals(configured)).toBe(true);

    const dataDir = path.join(dir, 'nested', 'data');
    const generated = await loadMasterKey(undefined, dataDir);
    expect(generated).toHaveLength(32);
    const file = path.join(dataDir, 'master.key');
    expect(Buffer.from((await readFile(file, 'utf8')).trim(), 'base64').equals(generated)).toBe(true);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect((await loadMasterKey(undefined, dataDir)).equals(generated)).toBe(true);
  });
});

describe('helpers', () => {
  it('hashes service keys deterministically to hex SHA-256', () => {
    const hash = hashServiceKey('sk_int_abc');
    expect(hash).toMatch(/^[0-9a-f]{64}$/);
    expect(hashServiceKey('sk_int_abc')).toBe(hash);
    expect(hashServiceKey('sk_int_abd')).not.toBe(hash);
    // The stored hashes of existing keys must keep matching: SHA-256 of the key's UTF-8 bytes.
    expect(hash).toBe('1cfd1b929a85a2b76ab6400c22dd33330b4b0c75b50d7bbd8245fdd1c8bf451c');
  });

  it('makes random tokens of the requested length over [A-Za-z0-9]', () => {
    const tokens = Array.from({ length: 200 }, () => randomToken(40));
    for (const token of tokens) expect(token).toMatch(/^[A-Za-z0-9]{40}$/);
    expect(new Set(tokens).size).toBe(tokens.length);
    // Every character class shows up over 8000 characters (probability of failing is negligible).
    const all = tokens.join('');
    expect(all).toMatch(/[0-9]/);
    expect(all).toMatch(/[A-Z]/);
    expect(all).toMatch(/[a-z]/);
  });

  it('compares buffers of different lengths as unequal without throwing', () => {
    expect(constantTimeEqual(Buffer.from('abc'), Buffer.from('abc'))).toBe(true);
    expect(constantTimeEqual(Buffer.from('abc'), Buffer.from('abd'))).toBe(false);
    expect(constantTimeEqual(Buffer.from('abc'), Buffer.from('abcd'))).toBe(false);
    expect(constantTimeEqual(Buffer.alloc(0), Buffer.alloc(0))).toBe(true);
    expect(constantTimeEqual(Buffer.alloc(0), Buffer.from('a'))).toBe(false);
  });
});
