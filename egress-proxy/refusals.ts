/**
 * The egress proxy's own answers: every request it does not forward ends here, counted under its outcome and
 * logged by runner and destination (never a value, token, header or body). A refusal closes the connection:
 * the client may still be sending a body the proxy will not read.
 *
 * A placeholder without a secret, or a bound secret's placeholder toward a destination outside its hosts, is
 * told to the embedder (`onMissing`, which ends the run) before the client gets its answer; nothing of the
 * request has reached the upstream by then, or the upstream request has been destroyed mid-body. The answer
 * and the log name the alias and the destination, never a value.
 */
import type { ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Destination } from './destination-policy.js';
import {
  callerFields,
  type EgressLogger,
  type EgressProxyOptions,
  type EgressRefusal,
  type RunCaller,
  type RunCredential,
} from './egress-types.js';
import type { EgressMetrics, EgressOutcome } from './egress-metrics.js';
import { authority } from './http-messages.js';
import { placeholderFor } from './placeholder.js';
import { MissingSecretError, SecretDestinationError, SecretPlacementError } from './secret-substitution.js';

export const PROXY_AUTH_REALM = 'Basic realm="acis-egress"';

export interface Refusals {
  /** Answers the proxy's own response (not an upstream one) and counts it. */
  refuse(res: ServerResponse, status: number, outcome: EgressOutcome, message: string): void;
  /** 407: no credential, or one that stands for no run now. */
  refuseAuth(res: ServerResponse): void;
  /** A refusal written on a raw socket (a CONNECT or an upgrade, which have no response object). */
  refuseRaw(socket: Duplex, outcome: EgressOutcome, status: number, reason: string, extraHeaders: string, message: string): void;
  /**
   * A substitution failed: a missing secret or a bound one toward another destination (the run is to be
   * ended), or a value that cannot stand there.
   */
  refuseSecret(res: ServerResponse, caller: RunCaller, destination: Destination, err: unknown): void;
  refuseDestination(res: ServerResponse, caller: RunCaller, destination: Destination, reason: string): void;
  logRefusal(caller: RunCaller, destination: Destination, reason: string): void;
  failInternally(res: ServerResponse, err: unknown): void;
}

export function createRefusals(
  options: Pick<EgressProxyOptions, 'onMissing' | 'onRefused' | 'missingSecretStatus'>,
  metrics: EgressMetrics,
  logger: EgressLogger,
): Refusals {
  const missingStatus = options.missingSecretStatus ?? 422;
  const refuse: Refusals['refuse'] = (res, status, outcome, message) => {
    metrics.request(outcome);
    respond(res, status, outcome, message);
  };
  const failInternally: Refusals['failInternally'] = (res, err) => {
    logger.error({ err }, 'egress request failed');
    refuse(res, 500, 'internal', 'egress proxy error');
  };
  const tell = (credential: RunCredential, refusal: EgressRefusal) => {
    try {
      options.onRefused?.(credential.runnerId, credential.token, refusal);
    } catch (hookErr) {
      logger.error({ err: hookErr, runner_id: credential.runnerId }, 'onRefused hook failed');
    }
  };
  const logRefusal: Refusals['logRefusal'] = (caller, destination, reason) => {
    logger.warn({ ...callerFields(caller), destination: authority(destination), reason }, 'egress destination refused');
    tell(caller, { outcome: 'destination-refused', destination: authority(destination), detail: reason });
  };

  const refuseMissing = (res: ServerResponse, credential: RunCaller, destination: Destination, alias: string) => {
    logger.warn(
      { ...callerFields(credential), alias, destination: authority(destination) },
      'placeholder without a secret: run to be aborted',
    );
    tell(credential, { outcome: 'missing-secret', destination: authority(destination), detail: alias });
    try {
      options.onMissing(credential.runnerId, alias, credential.token);
    } catch (hookErr) {
      logger.error({ err: hookErr, runner_id: credential.runnerId }, 'onMissing hook failed');
    }
    refuse(res, missingStatus, 'missing-secret', `missing secret: ${placeholderFor(alias)} is not vaulted for this run`);
  };

  const refuseDestinationOfSecret = (res: ServerResponse, credential: RunCaller, err: SecretDestinationError) => {
    logger.warn(
      { ...callerFields(credential), alias: err.alias, destination: err.destination },
      'bound secret toward a destination outside its hosts: request refused, run to be aborted',
    );
    tell(credential, { outcome: 'secret-destination-denied', destination: err.destination, detail: err.alias });
    try {
      options.onMissing(credential.runnerId, err.alias, credential.token, err.destination);
    } catch (hookErr) {
      logger.error({ err: hookErr, runner_id: credential.runnerId }, 'onMissing hook failed');
    }
    refuse(
      res,
      403,
      'secret-destination-denied',
      `secret destination denied: ${placeholderFor(err.alias)} may not be sent to ${err.destination} (not among its allowed_hosts)`,
    );
  };

  return {
    refuse,
    failInternally,
    logRefusal,
    refuseAuth(res) {
      metrics.request('auth-required');
      respondAuthRequired(res);
    },
    refuseRaw(socket, outcome, status, reason, extraHeaders, message) {
      metrics.request(outcome);
      endRaw(socket, status, reason, extraHeaders, message);
    },
    refuseSecret(res, credential, destination, err) {
      if (err instanceof MissingSecretError) return refuseMissing(res, credential, destination, err.alias);
      if (err instanceof SecretDestinationError) return refuseDestinationOfSecret(res, credential, err);
      if (err instanceof SecretPlacementError) return refuse(res, 400, 'secret-placement', err.message);
      failInternally(res, err);
    },
    refuseDestination(res, credential, destination, reason) {
      logRefusal(credential, destination, reason);
      refuse(res, 403, 'destination-refused', `egress refused: ${reason}`);
    },
  };
}

/** An answer of the proxy's own, outside the metrics (an upstream that failed after being counted). */
export function respond(res: ServerResponse, status: number, code: string, message: string): void {
  if (res.headersSent) return void res.destroy();
  // The client may still be sending a body the proxy will not read: close rather than drain it.
  res.writeHead(status, {
    'content-type': 'text/plain; charset=utf-8',
    'x-acis-egress-error': code,
    connection: 'close',
  });
  res.end(`${message}\n`);
}

function respondAuthRequired(res: ServerResponse): void {
  if (res.headersSent) return void res.destroy();
  res.writeHead(407, {
    'proxy-authenticate': PROXY_AUTH_REALM,
    'content-type': 'text/plain; charset=utf-8',
    'x-acis-egress-error': 'proxy-auth-required',
    connection: 'close',
  });
  res.end('run credentials required\n');
}

function endRaw(socket: Duplex, status: number, reason: string, extraHeaders: string, message: string): void {
  if (!socket.writable) return void socket.destroy();
  const body = `${message}\n`;
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\n${extraHeaders}Content-Type: text/plain; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}
