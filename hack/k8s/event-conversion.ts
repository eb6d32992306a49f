/**
 * core/v1 and events.k8s.io/v1 Events are two views of one stored object, as on a real cluster: a
 * controller may record with either API and `kubectl describe` (which reads core/v1 with
 * involvedObject field selectors) shows the event. Stored in the core/v1 form.
 */
import type { KubeObject } from './store.js';

/** events.k8s.io/v1 field ↔ core/v1 field. */
const RENAMED: Array<[string, string]> = [
  ['regarding', 'involvedObject'],
  ['note', 'message'],
  ['reportingController', 'reportingComponent'],
  ['deprecatedSource', 'source'],
  ['deprecatedFirstTimestamp', 'firstTimestamp'],
  ['deprecatedLastTimestamp', 'lastTimestamp'],
  ['deprecatedCount', 'count'],
];

function rename(object: KubeObject, pairs: Array<[string, string]>): KubeObject {
  const result: KubeObject = { ...object };
  for (const [from, to] of pairs) {
    if (from in result) {
      result[to] = result[from];
      delete result[from];
    }
  }
  return result;
}

export function eventsV1ToCore(object: KubeObject): KubeObject {
  return rename(object, RENAMED);
}

export function coreToEventsV1(object: KubeObject): KubeObject {
  return rename(
    object,
    RENAMED.map(([eventsField, coreField]) => [coreField, eventsField]),
  );
}
