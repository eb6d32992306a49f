/**
 * A small batch/v1 Job controller, as kube-controller-manager runs one: a Job gets pods from its
 * template (labelled `batch.kubernetes.io/job-name` and `batch.kubernetes.io/controller-uid`, owned
 * by the Job) until `completions` of them have succeeded, at most `parallelism` at a time; more than
 * `backoffLimit` failed pods fail the Job (reason BackoffLimitExceeded) and stop its active pods. Its
 * status counts active, ready, succeeded and failed pods and carries the Complete or Failed
 * condition (after SuccessCriteriaMet or FailureTarget, as since Kubernetes 1.31).
 *
 * Not implemented: suspend, activeDeadlineSeconds, indexed completion, pod failure policies,
 * backoff delays between retries (a failed pod is replaced at once), ttlSecondsAfterFinished.
 */
import { KubeStatusError } from './errors.js';
import { timestamp, type KubeObjects } from './objects.js';
import type { KubeObject, StoreChange } from './store.js';

interface JobSpec {
  completions?: number;
  parallelism?: number;
  backoffLimit?: number;
  template?: { metadata?: { labels?: Record<string, string>; annotations?: Record<string, string> }; spec?: Record<string, unknown> };
}

interface JobStatus {
  active?: number;
  ready?: number;
  succeeded?: number;
  failed?: number;
  startTime?: string;
  completionTime?: string;
  conditions?: Array<{
    type: string;
    status: string;
    reason?: string;
    message?: string;
    lastProbeTime?: string;
    lastTransitionTime?: string;
  }>;
}

function phaseOf(pod: KubeObject): string | undefined {
  return (pod.status as { phase?: string } | undefined)?.phase;
}

function finished(status: JobStatus): boolean {
  return (status.conditions ?? []).some(
    (condition) => (condition.type === 'Complete' || condition.type === 'Failed') && condition.status === 'True',
  );
}

export class JobController {
  private readonly unsubscribe: () => void;
  private readonly queued = new Set<string>();
  private closed = false;

  constructor(private readonly objects: KubeObjects) {
    this.unsubscribe = objects.store.subscribe((change) => this.observe(change));
  }

  close(): void {
    this.closed = true;
    this.unsubscribe();
  }

  private observe(change: StoreChange): void {
    if (change.storageKey === 'batch/jobs' && change.type !== 'DELETED')
      this.enqueue(change.object.metadata.namespace!, change.object.metadata.name!);
    if (change.storageKey === '/pods') {
      const owner = (change.object.metadata.ownerReferences ?? []).find(
        (reference) => reference.controller && reference.kind === 'Job' && reference.apiVersion === 'batch/v1',
      );
      if (owner) this.enqueue(change.object.metadata.namespace!, owner.name);
    }
  }

  private enqueue(namespace: string, name: string): void {
    const key = `${namespace}/${name}`;
    if (this.queued.has(key)) return;
    this.queued.add(key);
    setImmediate(() => {
      this.queued.delete(key);
      if (this.closed) return;
      try {
        this.reconcile(namespace, name);
      } catch (error) {
        // Raced with another writer: the change that caused it brings the Job back here.
        if (!(error instanceof KubeStatusError)) throw error;
      }
    });
  }

  private reconcile(namespace: string, name: string): void {
    const job = this.objects.find('jobs', namespace, name);
    if (!job || job.metadata.deletionTimestamp) return;
    const spec = (job.spec ?? {}) as JobSpec;
    const status = (job.status ?? {}) as JobStatus;
    if (finished(status)) return;
    const pods = this.objects.store
      .dependentsOf(job.metadata.uid!)
      .filter(({ storageKey }) => storageKey === '/pods')
      .map(({ object }) => object);
    const active = pods.filter((pod) => !pod.metadata.deletionTimestamp && phaseOf(pod) !== 'Succeeded' && phaseOf(pod) !== 'Failed');
    const succeeded = pods.filter((pod) => phaseOf(pod) === 'Succeeded').length;
    const failed = pods.filter((pod) => phaseOf(pod) === 'Failed').length;
    const completions = spec.completions ?? 1;
    const now = timestamp();
    const next: JobStatus = {
      ...status,
      startTime: status.startTime ?? now,
      active: active.length,
      ready: active.filter((pod) =>
        ((pod.status as { conditions?: Array<{ type: string; status: string }> })?.conditions ?? []).some(
          (condition) => condition.type === 'Ready' && condition.status === 'True',
        ),
      ).length,
      succeeded,
      failed,
    };
    if (succeeded >= completions) {
      next.completionTime = now;
      next.conditions = [
        {
          type: 'SuccessCriteriaMet',
          status: 'True',
          reason: 'CompletionsReached',
          message: 'Reached expected number of succeeded pods',
          lastProbeTime: now,
          lastTransitionTime: now,
        },
        {
          type: 'Complete',
          status: 'True',
          reason: 'CompletionsReached',
          message: 'Reached expected number of succeeded pods',
          lastProbeTime: now,
          lastTransitionTime: now,
        },
      ];
    } else if (failed > (spec.backoffLimit ?? 6)) {
      next.conditions = [
        {
          type: 'FailureTarget',
          status: 'True',
          reason: 'BackoffLimitExceeded',
          message: 'Job has reached the specified backoff limit',
          lastProbeTime: now,
          lastTransitionTime: now,
        },
        {
          type: 'Failed',
          status: 'True',
          reason: 'BackoffLimitExceeded',
          message: 'Job has reached the specified backoff limit',
          lastProbeTime: now,
          lastTransitionTime: now,
        },
      ];
      for (const pod of active) this.objects.delete('pods', namespace, pod.metadata.name!);
    } else {
      const wanted = Math.min(spec.parallelism ?? 1, completions - succeeded) - active.length;
      for (let index = 0; index < wanted; index++) this.createPod(job, spec);
      next.active = active.length + Math.max(0, wanted);
    }
    if (JSON.stringify(next) !== JSON.stringify(status)) {
      this.objects.update('jobs', namespace, name, { ...job, status: next }, { subresource: 'status' });
    }
  }

  private createPod(job: KubeObject, spec: JobSpec): void {
    const template = spec.template ?? {};
    const jobLabels = {
      'batch.kubernetes.io/controller-uid': job.metadata.uid!,
      'batch.kubernetes.io/job-name': job.metadata.name!,
      'controller-uid': job.metadata.uid!,
      'job-name': job.metadata.name!,
    };
    this.objects.create('pods', job.metadata.namespace, {
      metadata: {
        generateName: `${job.metadata.name}-`,
        labels: { ...template.metadata?.labels, ...jobLabels },
        ...(template.metadata?.annotations ? { annotations: template.metadata.annotations } : {}),
        ownerReferences: [
          {
            apiVersion: 'batch/v1',
            kind: 'Job',
            name: job.metadata.name!,
            uid: job.metadata.uid!,
            controller: true,
            blockOwnerDeletion: true,
          },
        ],
      },
      spec: structuredClone(template.spec ?? {}),
    });
  }
}
