/**
 * The admin commands (`acis integrations|service-keys|approver-keys ...`): a client of the admin API
 * of a running server, at ACIS_URL (default http://127.0.0.1:8080) with ACIS_ADMIN_TOKEN. The answer
 * is printed as it came; the exit code says whether it was a success.
 */
import { parseArgs } from 'node:util';

/** The command line does not name a request; `message` says why when there is more to say than the usage. */
export class UsageError extends Error {}

const ADMIN_OPTIONS = ['name', 'integration', 'tenant', 'algorithm', 'public-key', 'id'] as const;

export async function admin(resource: string, action: string | undefined, args: string[]): Promise<number> {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: withAttachedValues(args, ADMIN_OPTIONS),
      options: Object.fromEntries(ADMIN_OPTIONS.map((name) => [name, { type: 'string' as const }])),
    }));
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err));
  }
  const request = adminRequest(resource, action, values);
  if (!request) throw new UsageError();
  const baseUrl = (process.env.ACIS_URL ?? 'http://127.0.0.1:8080').replace(/\/+$/, '');
  const response = await fetch(`${baseUrl}${request.path}`, {
    method: request.method,
    headers: {
      authorization: `Bearer ${process.env.ACIS_ADMIN_TOKEN ?? ''}`,
      ...(request.body && { 'content-type': 'application/json' }),
    },
    body: request.body && JSON.stringify(request.body),
  });
  const text = await response.text();
  if (text) console.log(text);
  return response.ok ? 0 : 1;
}

/**
 * `--option value` as `--option=value` for options that always take a value: a base64url key or an id
 * may begin with `-`, which parseArgs would otherwise refuse as a possible option.
 */
function withAttachedValues(args: string[], names: readonly string[]): string[] {
  const joined: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    const next = args[i + 1];
    if (names.some((name) => arg === `--${name}`) && next !== undefined) {
      joined.push(`${arg}=${next}`);
      i++;
    } else joined.push(arg);
  }
  return joined;
}

function adminRequest(
  resource: string,
  action: string | undefined,
  v: Record<string, string | boolean | undefined>,
): { method: string; path: string; body?: object } | undefined {
  const enc = (value: string | boolean | undefined) => encodeURIComponent(String(value ?? ''));
  if (resource === 'integrations' && action === 'create' && v.name) {
    return { method: 'POST', path: '/admin/integrations', body: { name: v.name } };
  }
  if (resource === 'service-keys' && action === 'create' && v.integration) {
    return { method: 'POST', path: `/admin/integrations/${enc(v.integration)}/service-keys` };
  }
  if (resource === 'service-keys' && action === 'revoke' && v.id) {
    return { method: 'DELETE', path: `/admin/service-keys/${enc(v.id)}` };
  }
  if (resource === 'approver-keys' && action === 'create' && v.tenant && v.algorithm) {
    return {
      method: 'POST',
      path: `/admin/tenants/${enc(v.tenant)}/approver-keys`,
      body: { algorithm: v.algorithm, ...(v['public-key'] && { public_key: v['public-key'] }) },
    };
  }
  if (resource === 'approver-keys' && action === 'revoke' && v.id) {
    return { method: 'DELETE', path: `/admin/approver-keys/${enc(v.id)}` };
  }
  return undefined;
}
