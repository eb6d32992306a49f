/**
 * The runner pod and its token Secret, as pure functions of the owner and the controller's
 * configuration. Invariant: a runner pod is locked down (non-root, read-only root filesystem with a
 * writable workspace, no privilege escalation, no capabilities, seccomp RuntimeDefault, no
 * service-account token, no service links) and reaches the outside only through the egress proxy.
 */
import { createHash } from 'node:crypto';
import type { V1OwnerReference, V1Pod, V1PodSpec, V1ResourceRequirements, V1Secret, V1Volume } from '@kubernetes/client-node';
import {
  API_VERSION,
  LABELS,
  MANAGED_BY,
  RUNNER_COMPONENT,
  RUNNER_PORT_NAME,
  type Sandbox,
  type SandboxWarmPool,
  tokenSecretName,
} from './api/v1alpha1.js';
import { MODEL_KEY_ALIAS } from '../egress-proxy/model-endpoint.js';
import { placeholderFor } from '../egress-proxy/placeholder.js';
import type { ControllerConfig } from './config.js';
import { mergeResources } from './runner-resources.js';

export type RunnerOwner = Sandbox | SandboxWarmPool;

/** The name of the runner's drain port, where its preStop hook waits (runner/drain-server.ts). */
const DRAIN_PORT_NAME = 'drain';
/** How long a deleted runner pod may take to end: its preStop hook's wait, then SIGTERM. */
const RUNNER_TERMINATION_GRACE_SECONDS = 30;
/** The runner's uid and gid inside its image (not root). */
const RUNNER_UID = 10001;
/** Where the egress proxy's CA certificate is mounted (the runner image's ACIS_EGRESS_CA_FILE is its `ca.crt`). */
export const EGRESS_CA_DIR = '/etc/acis/egress-ca';
/** The trust bundle (system roots plus the proxy's CA) the runner image's entrypoint writes into the pod's /tmp. */
export const CA_BUNDLE_PATH = '/tmp/acis-ca-bundle.pem';
/** What a runner pod holds instead of the platform's model key; the egress proxy replaces it on model calls only. */
export const MODEL_KEY_PLACEHOLDER = placeholderFor(MODEL_KEY_ALIAS);

export function controllerRef(owner: RunnerOwner): V1OwnerReference {
  return {
    apiVersion: API_VERSION,
    kind: owner.kind,
    name: owner.metadata.name,
    uid: owner.metadata.uid!,
    controller: true,
    blockOwnerDeletion: true,
  };
}

/** Labels a runner pod carries while it serves `sandbox` (set on creation, or on adoption from a pool). */
export function sandboxPodLabels(sandbox: Sandbox): Record<string, string> {
  return {
    [LABELS.managedBy]: MANAGED_BY,
    [LABELS.component]: RUNNER_COMPONENT,
    [LABELS.agentType]: sandbox.spec.agentType,
    [LABELS.tenant]: sandbox.spec.tenantId,
    [LABELS.conversation]: sandbox.spec.conversationId,
    [LABELS.sandbox]: sandbox.metadata.name,
  };
}

function poolPodLabels(pool: SandboxWarmPool): Record<string, string> {
  return {
    [LABELS.managedBy]: MANAGED_BY,
    [LABELS.component]: RUNNER_COMPONENT,
    [LABELS.agentType]: pool.spec.agentType,
    [LABELS.pool]: pool.metadata.name,
  };
}

/**
 * The runner's two credentials: `token` authenticates the API server's connection to the runner;
 * `egress-token` is the runner's password at the egress proxy (user: the pod's name), which stands for
 * the run in progress on it only while the API server says so.
 */
export function tokenSecret(owner: RunnerOwner, podName: string, tokens: { token: string; egressToken: string }): V1Secret {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: tokenSecretName(podName),
      namespace: owner.metadata.namespace,
      labels: { [LABELS.managedBy]: MANAGED_BY, [LABELS.component]: RUNNER_COMPONENT },
      ownerReferences: [controllerRef(owner)],
    },
    type: 'Opaque',
    stringData: { token: tokens.token, 'egress-token': tokens.egressToken },
  };
}

/**
 * A runner pod: the controller's fixed part (above) with the operator's template (RuntimeClass,
 * scheduling, extra labels and annotations). A pool pod carries the hash of what it was made from
 * (`acis.dev/template-hash`), so the pool knows which of its idle pods are of an older template.
 */
export function runnerPod(owner: RunnerOwner, podName: string, config: ControllerConfig): V1Pod {
  const pod = templatedPod(owner, podName, config);
  if (owner.kind === 'Sandbox') return pod;
  return { ...pod, metadata: { ...pod.metadata, labels: { ...pod.metadata!.labels, [LABELS.templateHash]: templateHash(owner, config) } } };
}

/**
 * The hash of the pod a pool makes now: its spec and the operator's labels and annotations, for one
 * fixed pod name (names and token Secret names differ from pod to pod, the template does not). Any
 * change (image, resources, RuntimeClass, scheduling, the controller's settings the pod carries) is a new template.
 */
export function templateHash(pool: SandboxWarmPool, config: ControllerConfig): string {
  const pod = templatedPod(pool, 'template', config);
  const { labels, annotations } = config.runnerPodTemplate;
  return createHash('sha256')
    .update(JSON.stringify({ spec: pod.spec, labels, annotations }))
    .digest('hex')
    .slice(0, 10);
}

function templatedPod(owner: RunnerOwner, podName: string, config: ControllerConfig): V1Pod {
  const pod = lockedDownPod(owner, podName, config);
  const template = config.runnerPodTemplate;
  const annotations = template.annotations;
  return {
    ...pod,
    metadata: {
      ...pod.metadata,
      labels: { ...template.labels, ...pod.metadata!.labels },
      ...(Object.keys(annotations).length > 0 && { annotations: { ...annotations } }),
    },
    spec: {
      ...pod.spec!,
      ...(template.runtimeClassName && { runtimeClassName: template.runtimeClassName }),
      ...(Object.keys(template.nodeSelector).length > 0 && { nodeSelector: template.nodeSelector }),
      ...(template.tolerations.length > 0 && { tolerations: template.tolerations }),
      ...(Object.keys(template.affinity).length > 0 && { affinity: template.affinity }),
    },
  };
}

function lockedDownPod(owner: RunnerOwner, podName: string, config: ControllerConfig): V1Pod {
  const labels = owner.kind === 'Sandbox' ? sandboxPodLabels(owner) : poolPodLabels(owner);
  const resources = mergeResources(config.runnerResources, owner.spec.resources);
  // Expanded by the kubelet from the variables defined before it (POD_NAME, ACIS_EGRESS_TOKEN).
  const proxy = `http://$(POD_NAME):$(ACIS_EGRESS_TOKEN)@${config.egressProxyHost}:${config.egressProxyPort}`;
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: podName, namespace: owner.metadata.namespace, labels, ownerReferences: [controllerRef(owner)] },
    spec: {
      // A runner that exits has lost its live session: its Sandbox fails and the conversation
      // resumes from its transcript in a new one, rather than in a restarted process.
      restartPolicy: 'Never',
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      ...runnerDns(config),
      // The preStop hook's bound: an API server keeping the workspace of an expiring hold finishes
      // within it (an archive is at most 64 MiB), and a pod no API server holds ends at once.
      terminationGracePeriodSeconds: RUNNER_TERMINATION_GRACE_SECONDS,
      ...(config.imagePullSecrets.length > 0 && { imagePullSecrets: config.imagePullSecrets.map((name) => ({ name })) }),
      securityContext: {
        runAsNonRoot: true,
        runAsUser: RUNNER_UID,
        runAsGroup: RUNNER_UID,
        fsGroup: RUNNER_UID,
        seccompProfile: { type: 'RuntimeDefault' },
      },
      containers: [
        {
          name: 'runner',
          image: owner.spec.image ?? config.runnerImage,
          imagePullPolicy: 'IfNotPresent',
          ...(config.runnerCommand.length > 0 && { command: config.runnerCommand }),
          ports: [
            { name: RUNNER_PORT_NAME, containerPort: config.runnerPort, protocol: 'TCP' },
            { name: DRAIN_PORT_NAME, containerPort: config.runnerDrainPort, protocol: 'TCP' },
          ],
          env: [
            { name: 'ACIS_RUNNER_LISTEN', value: `0.0.0.0:${config.runnerPort}` },
            { name: 'ACIS_RUNNER_PORT', value: String(config.runnerPort) },
            { name: 'ACIS_RUNNER_DRAIN_PORT', value: String(config.runnerDrainPort) },
            // A pool pod serves a conversation not known yet: its agent runtime can start before it is.
            ...(owner.kind === 'SandboxWarmPool' && config.poolPrewarm ? [{ name: 'ACIS_PREWARM', value: '1' }] : []),
            { name: 'ACIS_RUNNER_TOKEN', valueFrom: { secretKeyRef: { name: tokenSecretName(podName), key: 'token' } } },
            { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
            { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
            { name: 'ACIS_EGRESS_TOKEN', valueFrom: { secretKeyRef: { name: tokenSecretName(podName), key: 'egress-token' } } },
            { name: 'HOME', value: '/workspace/.home' },
            { name: 'HTTP_PROXY', value: proxy },
            { name: 'HTTPS_PROXY', value: proxy },
            { name: 'http_proxy', value: proxy },
            { name: 'https_proxy', value: proxy },
            { name: 'NO_PROXY', value: '' },
            { name: 'ANTHROPIC_BASE_URL', value: config.modelBaseUrl },
            { name: 'ANTHROPIC_API_KEY', value: MODEL_KEY_PLACEHOLDER },
            ...caTrustEnv(config),
            { name: 'CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC', value: '1' },
            { name: 'IS_SANDBOX', value: '1' },
          ],
          resources: resources as V1ResourceRequirements,
          readinessProbe: { tcpSocket: { port: config.runnerPort }, periodSeconds: 1, failureThreshold: 3 },
          // Deleted (idle TTL, warm cap, its Sandbox gone), the runner stops only once the API server
          // connected to it is done: keeping the conversation's workspace, then saying goodbye.
          lifecycle: { preStop: { httpGet: { path: '/drain', port: DRAIN_PORT_NAME } } },
          securityContext: {
            runAsNonRoot: true,
            allowPrivilegeEscalation: false,
            readOnlyRootFilesystem: true,
            privileged: false,
            capabilities: { drop: ['ALL'] },
            seccompProfile: { type: 'RuntimeDefault' },
          },
          volumeMounts: [
            { name: 'workspace', mountPath: '/workspace' },
            { name: 'tmp', mountPath: '/tmp' },
            ...(config.egressCaConfigMap ? [{ name: 'egress-ca', mountPath: EGRESS_CA_DIR, readOnly: true }] : []),
          ],
          workingDir: '/workspace',
        },
      ],
      volumes: [
        // The workspace is most of what a runner writes: bounded by itself, it is evicted with a
        // reason that names it, before the container's ephemeral-storage limit is reached.
        {
          name: 'workspace',
          emptyDir: resources.limits?.['ephemeral-storage'] ? { sizeLimit: resources.limits['ephemeral-storage'] } : {},
        },
        { name: 'tmp', emptyDir: { medium: 'Memory', sizeLimit: '64Mi' } },
        // Not optional: a pod started without the CA would fail every HTTPS request for its life.
        ...(config.egressCaConfigMap ? [egressCaVolume(config.egressCaConfigMap)] : []),
      ],
    },
  };
}

/** The volume of the deployment CA's certificate (ACIS_EGRESS_CA_CONFIGMAP), mounted at EGRESS_CA_DIR. */
export function egressCaVolume(configMap: string): V1Volume {
  return { name: 'egress-ca', configMap: { name: configMap, items: [{ key: 'ca.crt', path: 'ca.crt' }] } };
}

/**
 * Trust of the egress proxy's CA, as the local provider gives its sandboxes: Node takes the CA on top of
 * its roots; curl, git, OpenSSL and Python take the bundle the image's entrypoint builds from it. The
 * runner's link requires the API server's client certificate to chain to the same CA (the deployment's):
 * without it the runner refuses to start, as it serves TLS only.
 */
function caTrustEnv(config: ControllerConfig): Array<{ name: string; value: string }> {
  if (!config.egressCaConfigMap) return [];
  const bundle = (name: string) => ({ name, value: CA_BUNDLE_PATH });
  return [
    { name: 'ACIS_RUNNER_TLS_CA_FILE', value: `${EGRESS_CA_DIR}/ca.crt` },
    { name: 'ACIS_EGRESS_CA_FILE', value: `${EGRESS_CA_DIR}/ca.crt` },
    { name: 'NODE_EXTRA_CA_CERTS', value: `${EGRESS_CA_DIR}/ca.crt` },
    bundle('SSL_CERT_FILE'),
    bundle('CURL_CA_BUNDLE'),
    bundle('GIT_SSL_CAINFO'),
    bundle('REQUESTS_CA_BUNDLE'),
  ];
}

/**
 * Sandbox DNS off (the default): the pod's resolver points at its own loopback, where nothing
 * answers, so a lookup fails at once rather than leave the pod (the NetworkPolicy drops it too). The
 * proxy is addressed by IP (startController resolved it), and the proxy resolves every name a
 * runner's requests carry.
 */
function runnerDns(config: ControllerConfig): Partial<V1PodSpec> {
  return config.sandboxDns ? {} : { dnsPolicy: 'None', dnsConfig: { nameservers: ['127.0.0.1'], searches: [] } };
}
