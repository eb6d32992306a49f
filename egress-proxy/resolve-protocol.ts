/**
 * How a standalone egress proxy learns a run's values from the API server: the API server's internal
 * resolve listener (api-server/egress/resolve-server.ts) and the proxy's client of it (resolve-client.ts)
 * share these paths, bodies and the reading of the bearer token that guards them.
 *
 * - `POST /v1/egress/resolve` `{runner_id, token}` (a runner's proxy credential) → `{in_progress: true,
 *   secrets, request_id?}` for the run in progress on that runner now, else `{in_progress: false}`. A secret is
 *   its value, or `{value, allowed_hosts}` when bound (as the API takes it); `request_id` is the id of the API
 *   request that started the run, for the proxy's log lines.
 * - `POST /v1/egress/missing` `{runner_id, token, alias, destination?}` → the run in progress on that runner
 *   is ended for a missing secret, or, with `destination`, for a bound secret sent toward it
 *   (secret-destination-denied), wherever it is hosted: `{in_progress: true}`, else `{in_progress: false}`.
 * - `POST /v1/egress/refused` `{runner_id, token, outcome, destination, detail}` → a refusal of the runner's
 *   request (a denied destination, a missing secret, a bound secret toward another host) is recorded where
 *   operators look (an Event on its Sandbox, aggregated): `{in_progress: true}`, else `{in_progress: false}`
 *   (the credential stands for no run: nothing recorded).
 *
 * Every call carries `Authorization: Bearer <resolve token>`; every answer is `Cache-Control: no-store`.
 * The listener speaks HTTPS only, with a certificate of the deployment CA naming its Service, and admits a
 * client only with a certificate of the same CA naming the egress proxy (`EGRESS_PROXY_NAME`): the token
 * never crosses the network in clear, and a stolen token is no use without the proxy's certificate.
 */
import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import { ALIAS_PATTERN } from './placeholder.js';
import { MAX_ALLOWED_HOSTS, type RunSecret } from './secret-binding.js';

/** The name (certificate CN or DNS SAN) the resolve listener requires of its client's certificate. */
export const EGRESS_PROXY_NAME = 'acis-egress-proxy';

export const RESOLVE_PATH = '/v1/egress/resolve';
export const MISSING_PATH = '/v1/egress/missing';
export const REFUSED_PATH = '/v1/egress/refused';

/** The shortest resolve token accepted: it guards every run's values. */
export const MIN_RESOLVE_TOKEN_LENGTH = 32;

export const ResolveRequestSchema = z.object({ runner_id: z.string().min(1).max(253), token: z.string().min(1).max(1024) }).strict();
export const MissingRequestSchema = ResolveRequestSchema.extend({
  alias: z.string().regex(ALIAS_PATTERN),
  destination: z.string().min(1).max(300).optional(),
}).strict();

export const RefusedRequestSchema = ResolveRequestSchema.extend({
  outcome: z.enum(['destination-refused', 'missing-secret', 'secret-destination-denied']),
  destination: z.string().min(1).max(300),
  detail: z.string().min(1).max(500),
}).strict();

/** A run's secrets on the wire (the resolve answer, the runs file): alias → value or `{value, allowed_hosts}`. */
export const WireSecretsSchema = z.record(
  z.string().regex(ALIAS_PATTERN),
  z.union([z.string(), z.object({ value: z.string(), allowed_hosts: z.array(z.string()).min(1).max(MAX_ALLOWED_HOSTS) })]),
);
export type WireSecrets = z.infer<typeof WireSecretsSchema>;

export const toWireSecrets = (secrets: ReadonlyMap<string, RunSecret>): WireSecrets =>
  Object.fromEntries(
    [...secrets].map(([alias, secret]) => [
      alias,
      typeof secret === 'string' ? secret : { value: secret.value, allowed_hosts: [...secret.allowedHosts] },
    ]),
  );

export const fromWireSecrets = (secrets: WireSecrets): Map<string, RunSecret> =>
  new Map(
    Object.entries(secrets).map(([alias, secret]) => [
      alias,
      typeof secret === 'string' ? secret : { value: secret.value, allowedHosts: secret.allowed_hosts },
    ]),
  );

/**
 * A request id as the proxy logs it: bounded and printable, whatever the answer says (the API only hands
 * out ids it minted or accepted under a stricter grammar; this keeps a wrong answer from flooding a log line).
 */
const RequestIdSchema = z.string().regex(/^[\x21-\x7e]{1,128}$/);

export const ResolveAnswerSchema = z.discriminatedUnion('in_progress', [
  z.object({ in_progress: z.literal(true), secrets: WireSecretsSchema, request_id: RequestIdSchema.optional() }),
  z.object({ in_progress: z.literal(false) }),
]);
export const MissingAnswerSchema = z.object({ in_progress: z.boolean() });

export type ResolveRequest = z.infer<typeof ResolveRequestSchema>;
export type MissingRequest = z.infer<typeof MissingRequestSchema>;
export type ResolveAnswer = z.infer<typeof ResolveAnswerSchema>;

/** The resolve token as configured: given inline, or as a file (a mounted Secret) read at start. */
export type ResolveTokenSetting = { value: string } | { file: string };

/**
 * `<name>` or `<name>_FILE` from `env`, never both; undefined when neither is set. A problem is
 * returned as a message for the caller's list of configuration errors.
 */
export function resolveTokenSetting(env: NodeJS.ProcessEnv, name: string): ResolveTokenSetting | undefined | string {
  const value = env[name];
  const file = env[`${name}_FILE`];
  if (value && file) return `${name} and ${name}_FILE are both set; set one`;
  if (file) return { file };
  if (value === undefined || value === '') return undefined;
  return value.length < MIN_RESOLVE_TOKEN_LENGTH ? `${name} must be at least ${MIN_RESOLVE_TOKEN_LENGTH} characters` : { value };
}

/** The token itself; a file's trailing newline is not part of it. Throws without echoing the token. */
export async function readResolveToken(setting: ResolveTokenSetting): Promise<string> {
  const token = 'value' in setting ? setting.value : (await readFile(setting.file, 'utf8')).replace(/\r?\n$/, '');
  if (token.length < MIN_RESOLVE_TOKEN_LENGTH) {
    throw new Error(
      `the egress resolve token${'file' in setting ? ` in ${setting.file}` : ''} must be at least ${MIN_RESOLVE_TOKEN_LENGTH} characters`,
    );
  }
  return token;
}
