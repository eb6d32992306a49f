import { Counter, type Registry } from 'prom-client';

/**
 * The egress proxy's Prometheus metrics. In-process they join the API server's registry (served on
 * its `/metrics`); the standalone proxy serves its own registry (ACIS_EGRESS_METRICS_PORT).
 *
 * Labels are closed sets: never a destination, run id, credential, alias or value.
 */
export type EgressOutcome =
  | 'forwarded'
  | 'auth-required'
  | 'destination-refused'
  | 'missing-secret'
  | 'secret-destination-denied'
  | 'secret-placement'
  | 'bad-request'
  | 'upgrade-refused'
  | 'upstream-error'
  | 'undecodable-response'
  | 'lookup-failed'
  | 'rate-limited'
  | 'internal';

/** The outcomes that are the proxy saying no to a run (rather than a malformed request or a failure). */
const DENIALS = new Set<EgressOutcome>([
  'auth-required',
  'destination-refused',
  'missing-secret',
  'secret-destination-denied',
  'secret-placement',
  'upgrade-refused',
  'rate-limited',
]);

export interface EgressMetrics {
  /** One request (or one CONNECT refused before its tunnel opened) and how it ended. */
  request(outcome: EgressOutcome): void;
  /** A vaulted value put in place of a placeholder. */
  substituted(): void;
}

export const noEgressMetrics: EgressMetrics = { request: () => {}, substituted: () => {} };

export function createEgressMetrics(registry: Registry): EgressMetrics {
  const registers = [registry];
  const requests = new Counter({
    name: 'acis_egress_requests_total',
    help: 'Requests through the egress proxy, by outcome (forwarded: an upstream answer was relayed).',
    labelNames: ['outcome'],
    registers,
  });
  const denials = new Counter({
    name: 'acis_egress_denials_total',
    help: 'Requests the egress proxy refused, by reason.',
    labelNames: ['reason'],
    registers,
  });
  const substitutions = new Counter({
    name: 'acis_egress_substitutions_total',
    help: 'Placeholders replaced by vaulted values on the way out (in a streamed body, each alias once per request).',
    registers,
  });
  return {
    request(outcome) {
      requests.inc({ outcome });
      if (DENIALS.has(outcome)) denials.inc({ reason: outcome });
    },
    substituted() {
      substitutions.inc();
    },
  };
}
