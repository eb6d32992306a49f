import { describe, expect, it } from 'vitest';
import type { V1Job, V1Pod } from '@kubernetes/client-node';
import type { RepositorySync } from '../../controller/api/v1alpha1.js';
import { loadControllerConfig } from '../../controller/config.js';
import { decideRepositorySync, syncJobEnv, syncJobName } from '../../controller/reposync-decisions.js';
import { loadConfig } from '../../api-server/config.js';
import { syncAttemptSettings } from '../../api-server/repositories/kubernetes-sync-dispatch.js';

const config = loadControllerConfig({
  ACIS_K8S_NAMESPACE: 'acis',
  ACIS_SYNC_IMAGE: 'acis:1',
  ACIS_SYNC_REPORT_URL: 'https://acis-sync-report.acis.svc:8082',
  ACIS_EGRESS_CA_CONFIGMAP: 'acis-egress-ca',
});
const now = new Date('2026-11-25T08:00:00Z');
const COMMIT = 'a'.repeat(40);

/** Generation 2 of a RepositorySync whose generation 1 has ended and had its credential removed. */
function sync(
  overrides: Partial<RepositorySync['spec']> = {},
  status: RepositorySync['status'] = { credentialRemovedGeneration: 1 },
): RepositorySync {
  return {
    apiVersion: 'acis.dev/v1alpha1',
    kind: 'RepositorySync',
    metadata: { name: 'rep-01abc', namespace: 'acis', uid: 'uid-1' },
    spec: {
      repositoryId: 'rep_01ABC',
      url: 'https://example.com/a.git',
      branch: 'main',
      provider: 'github',
      credentialSecretName: 'rep-01abc-credential-2',
      claim: 'c1a1m0000000',
      requestGeneration: 2,
      ...overrides,
    },
    status,
  };
}
const job = (condition?: 'Complete' | 'Failed', reason?: string, generation = 2): V1Job => ({
  metadata: { name: `rep-01abc-${generation}` },
  status: condition
    ? {
        conditions: [{ type: condition, status: 'True', ...(reason && { reason }) }],
        ...(condition === 'Complete' && { completionTime: now }),
      }
    : {},
});
const pod = (message?: string): V1Pod => ({
  metadata: { name: 'rep-01abc-2-x' },
  status: {
    containerStatuses: [
      {
        name: 'sync',
        image: 'acis:1',
        imageID: '',
        ready: false,
        restartCount: 0,
        state: { terminated: { exitCode: 0, ...(message && { message }) } },
      },
    ],
  },
});

describe('decideRepositorySync', () => {
  it("creates the generation's Job: owned, locked down, the credential mounted for it alone, the claim in its environment", () => {
    const decision = decideRepositorySync(sync(), {}, now, config);
    const created = decision.createJob!;
    expect(created.metadata!.name).toBe(syncJobName(sync()));
    expect(created.metadata!.ownerReferences![0]).toMatchObject({
      kind: 'RepositorySync',
      name: 'rep-01abc',
      uid: 'uid-1',
      controller: true,
    });
    const podSpec = created.spec!.template.spec!;
    const container = podSpec.containers[0]!;
    expect(container.args).toEqual(['sync-repository', 'rep_01ABC']);
    expect(container.env).toEqual(
      expect.arrayContaining([
        { name: 'ACIS_SYNC_CLAIM', value: 'c1a1m0000000' },
        { name: 'ACIS_SYNC_REPOSITORY_URL', value: 'https://example.com/a.git' },
        { name: 'ACIS_SYNC_BRANCH', value: 'main' },
        { name: 'ACIS_SYNC_PROVIDER', value: 'github' },
        { name: 'ACIS_SYNC_REPORT_URL', value: 'https://acis-sync-report.acis.svc:8082' },
        { name: 'ACIS_SYNC_REPORT_CA_FILE', value: '/etc/acis/egress-ca/ca.crt' },
        { name: 'ACIS_SYNC_TOKEN_FILE', value: '/var/run/acis/credential/token' },
        { name: 'ACIS_SYNC_CREDENTIAL_FILE', value: '/var/run/acis/credential/credential' },
      ]),
    );
    // The pod that runs git holds no database credential, and reads no Secret but its attempt's.
    const text = JSON.stringify(created);
    expect(text).not.toContain('DATABASE_URL');
    expect(text).not.toContain('acis-database');
    expect(container.env!.filter((e) => e.valueFrom !== undefined)).toEqual([]);
    expect(container.envFrom).toBeUndefined();
    expect(podSpec.volumes!.filter((v) => v.secret).map((v) => v.secret!.secretName)).toEqual(['rep-01abc-credential-2']);
    expect(podSpec.volumes).toContainEqual({ name: 'credential', secret: { secretName: 'rep-01abc-credential-2', defaultMode: 0o440 } });
    // The deployment CA's certificate (never its key), which the Job verifies the report listener with.
    expect(podSpec.volumes).toContainEqual({
      name: 'egress-ca',
      configMap: { name: 'acis-egress-ca', items: [{ key: 'ca.crt', path: 'ca.crt' }] },
    });
    expect(container.volumeMounts).toContainEqual({ name: 'egress-ca', mountPath: '/etc/acis/egress-ca', readOnly: true });
    expect(podSpec.automountServiceAccountToken).toBe(false);
    expect(container.securityContext).toMatchObject({
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
    });
    expect(created.spec).toMatchObject({ backoffLimit: 0, activeDeadlineSeconds: 600 });
    expect(decision.status).toMatchObject({
      state: 'syncing',
      jobName: 'rep-01abc-2',
      observedRequestGeneration: 2,
      credentialRemovedGeneration: 1,
    });
    expect(decision.deleteCredentialSecrets).toEqual([]);
    expect(decision.events).toEqual([{ type: 'Normal', reason: 'JobCreated', message: 'generation 2: started job rep-01abc-2' }]);
  });

  it("pulls the Job's image with the image pull Secrets of ACIS_IMAGE_PULL_SECRETS, none without", () => {
    const privateConfig = loadControllerConfig({
      ACIS_K8S_NAMESPACE: 'acis',
      ACIS_EGRESS_CA_CONFIGMAP: 'acis-egress-ca',
      ACIS_IMAGE_PULL_SECRETS: 'registry-example-com',
    });
    const created = decideRepositorySync(sync(), {}, now, privateConfig).createJob!;
    expect(created.spec!.template.spec!.imagePullSecrets).toEqual([{ name: 'registry-example-com' }]);
    expect(decideRepositorySync(sync(), {}, now, config).createJob!.spec!.template.spec!.imagePullSecrets).toBeUndefined();
  });

  it.each(['acis-master-key', 'acis-database', 'rep-01abc-credential-1', 'rep-other-credential-2'])(
    'refuses a spec naming a Secret ACIS did not make for this generation (%s): no Job, the sync in error, a Warning',
    (secretName) => {
      const decision = decideRepositorySync(sync({ credentialSecretName: secretName }), {}, now, config);
      expect(decision.createJob).toBeUndefined();
      expect(decision.status).toMatchObject({
        state: 'error',
        error: expect.stringMatching(new RegExp(`^spec\\.credentialSecretName is ${secretName}: .*\\(rep-01abc-credential-2\\)$`)),
        conditions: [expect.objectContaining({ type: 'Synced', status: 'False', reason: 'CredentialRefused' })],
      });
      expect(decision.events).toEqual([expect.objectContaining({ type: 'Warning', reason: 'CredentialRefused' })]);
    },
  );

  it('without a credential, no Secret is mounted', () => {
    const created = decideRepositorySync(sync({ credentialSecretName: undefined }), {}, now, config).createJob!;
    expect(created.spec!.template.spec!.volumes!.map((v) => v.name)).toEqual(['tmp', 'egress-ca']);
  });

  it('without the deployment CA (no ACIS_EGRESS_CA_CONFIGMAP) starts no Job: the sync in error, a Warning saying what to set', () => {
    const caless = loadControllerConfig({ ACIS_K8S_NAMESPACE: 'acis' });
    const decision = decideRepositorySync(sync(), {}, now, caless);
    expect(decision.createJob).toBeUndefined();
    expect(decision.status).toMatchObject({
      state: 'error',
      error: expect.stringMatching(/no ACIS_EGRESS_CA_CONFIGMAP .* could not verify .* set it \(chart: egressProxy\.ca\.configMap\)$/),
      conditions: [expect.objectContaining({ type: 'Synced', status: 'False', reason: 'NoDeploymentCa' })],
    });
    expect(decision.events).toEqual([expect.objectContaining({ type: 'Warning', reason: 'NoDeploymentCa' })]);
    // A Job already running (started when the CA was configured) is followed as before.
    expect(decideRepositorySync(sync(), { job: job() }, now, caless).status.state).toBe('syncing');
  });

  it('loadControllerConfig refuses a plain http ACIS_SYNC_REPORT_URL', () => {
    expect(() => loadControllerConfig({ ACIS_SYNC_REPORT_URL: 'http://acis-sync-report.acis.svc:8082' })).toThrow(
      /ACIS_SYNC_REPORT_URL: must be an https URL: the sync report listener speaks TLS only/,
    );
    expect(loadControllerConfig({}).syncReportUrl).toBe('https://acis-sync-report:8082');
  });

  it.each<[string, V1Job, V1Pod | undefined, Record<string, unknown>, boolean]>([
    ['running', job(), undefined, { state: 'syncing' }, false],
    [
      'complete and ready',
      job('Complete'),
      pod(JSON.stringify({ state: 'ready', commit: COMMIT })),
      { state: 'ready', commit: COMMIT, shortCommit: COMMIT.slice(0, 12), lastSyncedTime: now.toISOString() },
      true,
    ],
    [
      'failed with a reason',
      job('Failed', 'BackoffLimitExceeded'),
      pod(JSON.stringify({ state: 'error', error: 'authentication failed' })),
      { state: 'error', error: 'authentication failed' },
      true,
    ],
    [
      'past its deadline',
      job('Failed', 'DeadlineExceeded'),
      undefined,
      { state: 'error', error: 'the sync job ran past its deadline and was stopped' },
      true,
    ],
    ['complete but saying nothing', job('Complete'), pod(), { state: 'error' }, true],
    [
      'superseded by a newer change',
      job('Failed', 'BackoffLimitExceeded'),
      pod(JSON.stringify({ state: 'superseded' })),
      { conditions: [expect.objectContaining({ reason: 'Superseded' })] },
      true,
    ],
  ])('a Job %s', (_name, observedJob, observedPod, status, deletesSecret) => {
    const decision = decideRepositorySync(sync(), { job: observedJob, pod: observedPod }, now, config);
    expect(decision.createJob).toBeUndefined();
    expect(decision.status).toMatchObject(status);
    expect(decision.deleteCredentialSecrets).toEqual(deletesSecret ? ['rep-01abc-credential-2'] : []);
    expect(decision.status.credentialRemovedGeneration).toBe(deletesSecret ? 2 : 1);
  });

  it('records one Event per outcome: Normal when synced, Warning with the reason when failed, none when nothing changed', () => {
    const ready = decideRepositorySync(
      sync(),
      { job: job('Complete'), pod: pod(JSON.stringify({ state: 'ready', commit: COMMIT })) },
      now,
      config,
    );
    expect(ready.events).toEqual([{ type: 'Normal', reason: 'Synced', message: `generation 2: synced at ${COMMIT.slice(0, 12)}` }]);
    const failed = decideRepositorySync(sync(), { job: job('Failed', 'DeadlineExceeded') }, now, config);
    expect(failed.events).toEqual([
      { type: 'Warning', reason: 'SyncFailed', message: 'generation 2: the sync job ran past its deadline and was stopped' },
    ]);
    const running = decideRepositorySync(sync({}, decideRepositorySync(sync(), {}, now, config).status), { job: job() }, now, config);
    expect(running.events).toEqual([]);
  });

  it('once the outcome is written, no Secret is deleted again, no Event repeats and the status does not change', () => {
    const first = decideRepositorySync(
      sync(),
      { job: job('Complete'), pod: pod(JSON.stringify({ state: 'ready', commit: COMMIT })) },
      now,
      config,
    );
    const again = decideRepositorySync(
      sync({}, first.status),
      { job: job('Complete'), pod: pod(JSON.stringify({ state: 'ready', commit: COMMIT })) },
      new Date(now.getTime() + 60_000),
      config,
    );
    expect(again.deleteCredentialSecrets).toEqual([]);
    expect(again.events).toEqual([]);
    expect(again.status).toEqual(first.status);
  });

  it("an older generation's Job still running keeps its credential, while generations that will never run lose theirs at once", () => {
    // Generation 4 is current; 2 still runs (a PATCH let a new claim start before it ended); 3 was bumped past before its Job was made.
    const current = sync({ requestGeneration: 4, credentialSecretName: 'rep-01abc-credential-4' });
    const olderJobs = [job(undefined, undefined, 2)];
    const running = decideRepositorySync(current, { olderJobs }, now, config);
    expect(running.deleteCredentialSecrets).toEqual(['rep-01abc-credential-3']);
    expect(running.status.credentialRemovedGeneration).toBe(1);
    const ended = decideRepositorySync(
      sync({ requestGeneration: 4, credentialSecretName: 'rep-01abc-credential-4' }, running.status),
      { olderJobs: [job('Complete', undefined, 2)], job: job('Failed', 'DeadlineExceeded', 4) },
      now,
      config,
    );
    expect(ended.deleteCredentialSecrets).toEqual(['rep-01abc-credential-2', 'rep-01abc-credential-3', 'rep-01abc-credential-4']);
    expect(ended.status.credentialRemovedGeneration).toBe(4);
  });

  it('a termination message that is not ours is not trusted', () => {
    const decision = decideRepositorySync(
      sync(),
      { job: job('Complete'), pod: pod(JSON.stringify({ state: 'ready', commit: 'not-a-commit' })) },
      now,
      config,
    );
    expect(decision.status.state).toBe('error');
  });
});

describe('syncJobEnv', () => {
  it("gives the Job the API server's settings: the attempt's configuration agrees with the API server's", () => {
    const api = loadConfig({ ACIS_ALLOW_FILE_REPOS: '1', ACIS_SYNC_TIMEOUT_SECONDS: '77' });
    const env = syncJobEnv(sync({ settings: syncAttemptSettings(api) }), config);
    const values = Object.fromEntries(env.filter((e) => e.value !== undefined).map((e) => [e.name, e.value!]));
    const job = loadConfig(values);
    expect(job.allowFileRepos).toBe(true);
    expect(job.syncTimeoutSeconds).toBe(77);
    expect(job.databaseUrl).toBeUndefined();
    expect(env.map((e) => e.name)).not.toContain('DATABASE_URL');
    expect(values).toMatchObject({ ACIS_SYNC_CLAIM: 'c1a1m0000000', ACIS_SYNC_TOKEN_FILE: '/var/run/acis/credential/token' });
  });

  it('a request without settings (written by an older API server) leaves the Job its defaults', () => {
    const names = syncJobEnv(sync(), config).map((e) => e.name);
    expect(names).not.toContain('ACIS_ALLOW_FILE_REPOS');
    expect(names).not.toContain('ACIS_SYNC_TIMEOUT_SECONDS');
  });
});
