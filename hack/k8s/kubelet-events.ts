/**
 * The Events a scheduler and a kubelet record about a pod (Scheduled, FailedScheduling, Pulled,
 * Failed, Created, Started, BackOff, Killing, Unhealthy), so `kubectl describe pod` reads as on a
 * cluster. A repeat of the same reason and message for the same pod counts up one Event, as the
 * real recorders aggregate.
 */
import { randomBytes } from 'node:crypto';
import { KubeStatusError } from './errors.js';
import { timestamp, type KubeObjects } from './objects.js';

export interface PodRef {
  namespace: string;
  name: string;
  uid: string;
}

export type EventRecorder = (
  pod: PodRef,
  type: 'Normal' | 'Warning',
  reason: string,
  message: string,
  options?: { component?: string; fieldPath?: string },
) => void;

export function eventRecorder(objects: KubeObjects, nodeName: string): EventRecorder {
  /** `uid|reason|message` → event name, for aggregation. */
  const recorded = new Map<string, string>();
  return (pod, type, reason, message, options = {}) => {
    const component = options.component ?? 'kubelet';
    const key = `${pod.uid}|${reason}|${message}`;
    const now = timestamp();
    try {
      const existing = recorded.get(key);
      const previous = existing && objects.find('events', pod.namespace, existing);
      if (previous) {
        objects.patch('events', pod.namespace, existing!, 'application/merge-patch+json', {
          count: Number(previous.count ?? 1) + 1,
          lastTimestamp: now,
        });
        return;
      }
      const name = `${pod.name}.${randomBytes(8).toString('hex')}`;
      objects.create('events', pod.namespace, {
        metadata: { name },
        involvedObject: {
          apiVersion: 'v1',
          kind: 'Pod',
          namespace: pod.namespace,
          name: pod.name,
          uid: pod.uid,
          ...(options.fieldPath ? { fieldPath: options.fieldPath } : {}),
        },
        type,
        reason,
        message,
        source: component === 'kubelet' ? { component, host: nodeName } : { component },
        reportingComponent: component,
        reportingInstance: component === 'kubelet' ? nodeName : '',
        firstTimestamp: now,
        lastTimestamp: now,
        count: 1,
      });
      recorded.set(key, name);
    } catch (error) {
      // The namespace is going away: its events with it.
      if (!(error instanceof KubeStatusError)) throw error;
    }
  };
}
