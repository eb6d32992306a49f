/**
 * The egress proxy's contract with whoever embeds it (the API server, or its own process): the
 * options it is made with, the credential a runner presents, the values a run may use, and the
 * proxy once listening. Types (and the log fields of a caller), so the proxy's parts share them without
 * importing its factory.
 */
import type { DeploymentCa } from './deployment-ca.js';
import type { RunnerRateLimit } from './runner-rate-limit.js';
import type { EgressMetrics } from './egress-metrics.js';
import type { RunSecret } from './secret-binding.js';

/** A runner's proxy credential (Proxy-Authorization's user and password); `resolveRun` says which run it stands for now. */
export interface RunCredential {
  runnerId: string;
  token: string;
}

/**
 * Alias → plaintext value for one run, plain (unbound) or bound to its hosts (secret-binding.ts). Return the
 * same map object for a run to let the proxy reuse its masking tables.
 */
export type RunSecrets = ReadonlyMap<string, RunSecret>;

/** The run a credential stands for now, as `resolveRun` answers it. */
export interface ResolvedRun {
  secrets: RunSecrets;
  /**
   * The API request that started the run (its `X-Request-Id`): the proxy's log lines about the run's requests
   * carry it, so one id finds a turn in the API's, the controller's and the proxy's logs. Looked up, never
   * read from the runner's request: the agent cannot choose what the proxy's lines say it belongs to.
   */
  requestId?: string | undefined;
}

/** A credential once resolved: who the proxy's log lines say a request came from. */
export interface RunCaller extends RunCredential {
  requestId?: string | undefined;
}

/** The log fields naming a request's runner and the API request of its run. */
export function callerFields(caller: RunCaller): { runner_id: string; request_id?: string } {
  return caller.requestId === undefined ? { runner_id: caller.runnerId } : { runner_id: caller.runnerId, request_id: caller.requestId };
}

/** The subset of a pino logger the proxy uses. It never logs values, tokens, headers or bodies. */
export interface EgressLogger {
  debug(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export interface EgressProxyOptions {
  /**
   * The run a credential belongs to, as its secrets and request id; undefined when the credential is not valid (now).
   * A throw means the answer is unknown (its source is down): the request gets 503, nothing is forwarded.
   */
  resolveRun(credential: RunCredential): ResolvedRun | undefined | Promise<ResolvedRun | undefined>;
  /**
   * A placeholder named an alias the run lacks (missing-secret), or, with `destination`, a bound secret toward
   * a destination outside its hosts (secret-destination-denied, `destination` its authority); the run is to be
   * aborted. `token` is the credential's.
   */
  onMissing(runnerId: string, alias: string, token: string, destination?: string): void;
  /**
   * A request of an authenticated runner was refused (a denied destination, a missing secret, a bound
   * secret toward another host): for the embedder to record where operators look (an Event on the
   * runner's Sandbox). Called once per refusal; the embedder aggregates. `token` is the credential's.
   */
  onRefused?(runnerId: string, token: string, refusal: EgressRefusal): void;
  /** Where the deployment CA lives (created on first start), e.g. `$ACIS_DATA_DIR/egress-ca`; unread when `ca` is given. */
  caDir: string;
  /** The deployment CA, already loaded by the caller (the API server shares it with its own TLS identity). */
  ca?: DeploymentCa | undefined;
  /** ACIS_EGRESS_ALLOW: comma-separated `host` or `host:port` that may be reached although private. */
  allow?: string | undefined;
  /** ACIS_EGRESS_EXTRA_CA: a PEM bundle trusted for upstream TLS on top of Node's roots. */
  extraCaPath?: string | undefined;
  /** Listen address; default 127.0.0.1 and an ephemeral port. */
  host?: string;
  port?: number;
  logger?: EgressLogger;
  /** Status answered for an unresolvable placeholder; default 422 (the spec's missing-secret). */
  missingSecretStatus?: number;
  /** Where requests, denials and substitutions are counted (egress-metrics.ts); default: nowhere. */
  metrics?: EgressMetrics;
  /**
   * The platform's model endpoint (ANTHROPIC_BASE_URL) and key (ANTHROPIC_API_KEY), for runners that reach
   * the model through the proxy. The endpoint is allowed although private (cloud metadata never); requests
   * to it carry `apiKey` (when set) in x-api-key in place of the key headers sent. Absent: no destination is
   * special and the key is never used.
   */
  modelEndpoint?: { baseUrl: string; apiKey: string | undefined } | undefined;
  /** Requests per runner (ACIS_EGRESS_RUNNER_RATE, _BURST); default DEFAULT_RUNNER_RATE_LIMIT. Over it, 429. */
  runnerRateLimit?: RunnerRateLimit | undefined;
}

/** A refusal as told to the embedder: never a value, only the alias, the destination and why. */
export interface EgressRefusal {
  outcome: 'destination-refused' | 'missing-secret' | 'secret-destination-denied';
  /** The destination's authority (`host:port`). */
  destination: string;
  /** Why it was refused (destination-refused), or the alias whose placeholder was sent (the others). */
  detail: string;
}

export interface EgressProxy {
  readonly port: number;
  /** `http://host:port`; runners use `http://<runner_id>:<runner_token>@host:port` as HTTP(S)_PROXY. */
  readonly url: string;
  /** The deployment CA runners must trust. */
  readonly caCertificatePem: string;
  close(): Promise<void>;
}
