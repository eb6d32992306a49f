/**
 * Master key rotation: a server given the new key and the old one in ACIS_MASTER_KEY_PREVIOUS reads
 * everything vaulted under the old key and writes under the new one; `acis rotate-secrets`
 * re-encrypts what is left (secrets, credentials, approver keys), after which the new key alone
 * opens every value.
 */
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../api-server/config.js';
import { createVault } from '../../api-server/core/crypto.js';
import { resolveRunSecrets } from '../../api-server/secrets/secrets.service.js';
import { provisionUser, unique } from '../helpers/provision.js';
import { ADMIN_TOKEN, createTestDatabase, dropTestDatabase, startTestServer } from '../helpers/test-server.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const TSX = path.join(ROOT, 'node_modules/.bin/tsx');

const oldKey = randomBytes(32);
const newKey = randomBytes(32);
const keyId = (key: Buffer) => createHash('sha256').update(key).digest('hex').slice(0, 8);

let databaseUrl: string | undefined;
afterAll(async () => {
  if (databaseUrl) await dropTestDatabase(databaseUrl);
});

interface Sealed {
  table: string;
  context: string;
  ciphertext: string;
}

async function sealedValues(client: pg.Client): Promise<Sealed[]> {
  const secrets = await client.query('select scope, scope_id, alias, value_ciphertext from secrets');
  const credentials = await client.query('select id, secret_ciphertext from credentials');
  const approverKeys = await client.query('select id, secret_ciphertext from approver_keys where secret_ciphertext is not null');
  return [
    ...secrets.rows.map((r) => ({
      table: 'secrets',
      context: `secret:${r.scope}:${r.scope_id}:${r.alias}`,
      ciphertext: r.value_ciphertext,
    })),
    ...credentials.rows.map((r) => ({ table: 'credentials', context: `credential:${r.id}`, ciphertext: r.secret_ciphertext })),
    ...approverKeys.rows.map((r) => ({ table: 'approver_keys', context: `approver_key:${r.id}`, ciphertext: r.secret_ciphertext })),
  ];
}

async function rotateSecrets(url: string): Promise<Record<string, number>> {
  const { stdout } = await promisify(execFile)(TSX, ['cli/acis.ts', 'rotate-secrets'], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH,
      DATABASE_URL: url,
      ACIS_MASTER_KEY: newKey.toString('base64'),
      ACIS_MASTER_KEY_PREVIOUS: ` ${randomBytes(32).toString('base64')}, ${oldKey.toString('base64')} `,
      LOG_LEVEL: 'info',
    },
  });
  const line = stdout.split('\n').find((l) => l.includes('"rotated"'));
  if (!line) throw new Error(`no report in: ${stdout}`);
  return JSON.parse(line).rotated;
}

describe('master key rotation', () => {
  it('reads old values with the previous key, writes under the new one, and rotate-secrets re-encrypts the rest', async () => {
    databaseUrl = await createTestDatabase();
    const values = new Map<string, string>(); // context -> plaintext

    // Under the old key: secrets at every scope, a credential and an HMAC approver key.
    const before = await startTestServer({ DATABASE_URL: databaseUrl, ACIS_MASTER_KEY: oldKey.toString('base64') });
    let conversation: { id: string; user_id: string; tenant_id: string };
    let serviceKey: string;
    try {
      ({ serviceKey } = await before.createIntegration('rotation'));
      const owner = await provisionUser(before, serviceKey);
      const created = await before.request('POST', '/conversations', { token: serviceKey, body: { user_id: owner.userId } });
      conversation = { id: created.body.id, user_id: owner.userId, tenant_id: owner.tenantId };
      const scopes = [
        ['conversation', conversation.id, `/conversations/${conversation.id}/secrets`],
        ['user', owner.userId, `/users/${owner.userId}/secrets`],
        ['tenant', owner.tenantId, `/tenants/${owner.tenantId}/secrets`],
      ] as const;
      for (const [scope, id, url] of scopes) {
        const value = `${scope}-${unique('value')}`;
        expect((await before.request('PUT', url, { token: serviceKey, body: { secrets: { [scope.toUpperCase()]: value } } })).status).toBe(
          200,
        );
        values.set(`secret:${scope}:${id}:${scope.toUpperCase()}`, value);
      }
      const credential = await before.request('POST', '/credentials', {
        token: serviceKey,
        body: { name: unique('cred'), type: 'git_pat', secret: 'ghp_rotation' },
      });
      expect(credential.status).toBe(201);
      values.set(`credential:${credential.body.id}`, 'ghp_rotation');
      const approverKey = await before.request('POST', `/admin/tenants/${owner.tenantId}/approver-keys`, {
        token: ADMIN_TOKEN,
        body: { algorithm: 'hmac-sha256' },
      });
      expect(approverKey.status).toBe(201);
      values.set(`approver_key:${approverKey.body.id}`, approverKey.body.secret);
    } finally {
      await before.stop();
    }

    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    try {
      const sealedBefore = await sealedValues(client);
      expect(sealedBefore.map((s) => s.table).sort()).toEqual(['approver_keys', 'credentials', 'secrets', 'secrets', 'secrets']);
      for (const sealed of sealedBefore) expect(sealed.ciphertext.split('.')[1]).toBe(keyId(oldKey));

      // The new key, with the old one as previous: old values still resolve, new ones go under the new key.
      const during = await startTestServer({
        DATABASE_URL: databaseUrl,
        ACIS_MASTER_KEY: newKey.toString('base64'),
        ACIS_MASTER_KEY_PREVIOUS: oldKey.toString('base64'),
      });
      try {
        const resolved = await resolveRunSecrets(during.server.deps, { runId: undefined, conversation: conversation! });
        expect(Object.fromEntries(resolved)).toEqual({
          CONVERSATION: values.get(`secret:conversation:${conversation!.id}:CONVERSATION`),
          USER: values.get(`secret:user:${conversation!.user_id}:USER`),
          TENANT: values.get(`secret:tenant:${conversation!.tenant_id}:TENANT`),
        });
        const written = await during.request('PUT', `/conversations/${conversation!.id}/secrets`, {
          token: serviceKey!,
          body: { secrets: { WRITTEN_AFTER: 'new-value' } },
        });
        expect(written.status).toBe(200);
        values.set(`secret:conversation:${conversation!.id}:WRITTEN_AFTER`, 'new-value');
        const row = await client.query("select value_ciphertext from secrets where alias = 'WRITTEN_AFTER'");
        expect(row.rows[0].value_ciphertext.split('.')[1]).toBe(keyId(newKey));
      } finally {
        await during.stop();
      }

      expect(await rotateSecrets(databaseUrl)).toEqual({ scopedSecrets: 3, credentials: 1, approverKeys: 1 });
      const newOnly = createVault(newKey);
      const sealedAfter = await sealedValues(client);
      expect(sealedAfter).toHaveLength(sealedBefore.length + 1);
      for (const sealed of sealedAfter) {
        expect(sealed.ciphertext.split('.')[1]).toBe(keyId(newKey));
        expect(newOnly.decrypt(sealed.ciphertext, sealed.context)).toBe(values.get(sealed.context));
      }
      // Nothing is left to do on a second pass.
      expect(await rotateSecrets(databaseUrl)).toEqual({ scopedSecrets: 0, credentials: 0, approverKeys: 0 });
    } finally {
      await client.end();
    }
  }, 120_000);

  it('refuses an ACIS_MASTER_KEY_PREVIOUS entry that is not 32 bytes of base64', () => {
    const env = { ACIS_MASTER_KEY_PREVIOUS: `${randomBytes(32).toString('base64')},c2hvcnQ=` };
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(/ACIS_MASTER_KEY_PREVIOUS/);
    expect(loadConfig({ ACIS_MASTER_KEY_PREVIOUS: ` ${randomBytes(32).toString('base64')} , ` }).previousMasterKeys).toHaveLength(1);
  });
});
