/**
 * Pod Security admission ("Pod Security Admission", "Pod Security Standards"), for pods created in a
 * namespace labelled `pod-security.kubernetes.io/enforce` or `.../warn` with `baseline` or
 * `restricted` (any `-version` reads as `latest`): enforce refuses the pod with 403 Forbidden,
 * `pods "x" is forbidden: violates PodSecurity "restricted:latest": <reason> (<detail>), ...`; warn
 * admits it with a `299 - "would violate PodSecurity ..."` Warning header. Workload resources with a
 * pod template (Deployments, ReplicaSets, StatefulSets, DaemonSets, Jobs) get the warn mode's
 * warnings for their template and are never refused ("Workload resources and Pod templates": only
 * the pods they make are enforced). The checks and their wording follow
 * staging/src/k8s.io/pod-security-admission/policy (check_*.go), in the order of their ids, as the
 * real evaluator reports them. Not checked: Windows host processes, the user-namespace relaxations
 * (`hostUsers: false`); pod updates; exemptions. The `audit` mode writes to the audit log, which this
 * server does not keep: it has no effect here.
 */
import { KubeStatusError } from './errors.js';
import type { KubeObject } from './store.js';

type Level = 'privileged' | 'baseline' | 'restricted';

interface SecurityContext {
  appArmorProfile?: { type?: string };
  seLinuxOptions?: { type?: string; user?: string; role?: string };
  procMount?: string;
  sysctls?: Array<{ name: string }>;
  privileged?: boolean;
  allowPrivilegeEscalation?: boolean;
  runAsNonRoot?: boolean;
  runAsUser?: number;
  capabilities?: { add?: string[]; drop?: string[] };
  seccompProfile?: { type?: string };
}

interface Container {
  name: string;
  securityContext?: SecurityContext;
  ports?: Array<{ hostPort?: number }>;
}

interface PodSpec {
  hostNetwork?: boolean;
  hostPID?: boolean;
  hostIPC?: boolean;
  securityContext?: SecurityContext;
  containers?: Container[];
  initContainers?: Container[];
  volumes?: Array<Record<string, unknown> & { name: string }>;
}

/** A check: its forbidden reason and detail, or nothing when the pod passes. */
type Check = (spec: PodSpec, containers: Container[], annotations: Record<string, string>) => string | undefined;

const BASELINE_CAPABILITIES = new Set([
  'AUDIT_WRITE',
  'CHOWN',
  'DAC_OVERRIDE',
  'FOWNER',
  'FSETID',
  'KILL',
  'MKNOD',
  'NET_BIND_SERVICE',
  'SETFCAP',
  'SETGID',
  'SETPCAP',
  'SETUID',
  'SYS_CHROOT',
]);
const RESTRICTED_VOLUMES = new Set([
  'configMap',
  'csi',
  'downwardAPI',
  'emptyDir',
  'ephemeral',
  'persistentVolumeClaim',
  'projected',
  'secret',
]);

const APPARMOR_TYPES = new Set(['RuntimeDefault', 'Localhost']);
const APPARMOR_ANNOTATION = 'container.apparmor.security.beta.kubernetes.io/';
const SELINUX_TYPES = new Set(['', 'container_t', 'container_init_t', 'container_kvm_t', 'container_engine_t']);
/** The sysctls baseline allows (check_sysctls.go, latest). */
const SAFE_SYSCTLS = new Set([
  'kernel.shm_rmid_forced',
  'net.ipv4.ip_local_port_range',
  'net.ipv4.ip_local_reserved_ports',
  'net.ipv4.ip_unprivileged_port_start',
  'net.ipv4.ping_group_range',
  'net.ipv4.tcp_fin_timeout',
  'net.ipv4.tcp_keepalive_intvl',
  'net.ipv4.tcp_keepalive_probes',
  'net.ipv4.tcp_keepalive_time',
  'net.ipv4.tcp_rmem',
  'net.ipv4.tcp_syncookies',
  'net.ipv4.tcp_wmem',
]);

const plural = (count: number, one: string, many: string) => (count === 1 ? one : many);
/** Go's %q of each, comma-joined (joinQuote). */
const quoted = (names: string[]) => names.map((name) => JSON.stringify(name)).join(', ');
/** `container "a"` or `containers "a", "b"`, as the checks name what they found. */
const containersNamed = (found: Container[]) =>
  `${found.length === 1 ? 'container' : 'containers'} ${quoted(found.map((container) => container.name))}`;
const volumesNamed = (names: string[]) => `${names.length === 1 ? 'volume' : 'volumes'} ${quoted(names)}`;

const allowPrivilegeEscalation: Check = (_spec, containers) => {
  const found = containers.filter((container) => container.securityContext?.allowPrivilegeEscalation !== false);
  return found.length
    ? `allowPrivilegeEscalation != false (${containersNamed(found)} must set securityContext.allowPrivilegeEscalation=false)`
    : undefined;
};

const appArmorProfile: Check = (spec, containers, annotations) => {
  const setters: string[] = [];
  const values = new Set<string>();
  const podType = spec.securityContext?.appArmorProfile?.type;
  if (podType !== undefined && !APPARMOR_TYPES.has(podType)) {
    setters.push('pod');
    values.add(podType);
  }
  const found = containers.filter((container) => {
    const type = container.securityContext?.appArmorProfile?.type;
    if (type === undefined || APPARMOR_TYPES.has(type)) return false;
    values.add(type);
    return true;
  });
  if (found.length) setters.push(containersNamed(found));
  const badValues = [...values].sort();
  const forbiddenAnnotations = Object.entries(annotations)
    .filter(([key, value]) => key.startsWith(APPARMOR_ANNOTATION) && value !== 'runtime/default' && !value.startsWith('localhost/'))
    .map(([key, value]) => `${key}=${JSON.stringify(value)}`)
    .sort();
  if (forbiddenAnnotations.length) {
    badValues.push(...forbiddenAnnotations);
    setters.push(plural(forbiddenAnnotations.length, 'annotation', 'annotations'));
  }
  if (setters.length === 0) return undefined;
  return `${plural(badValues.length, 'forbidden AppArmor profile', 'forbidden AppArmor profiles')} (${setters.join(' and ')} must not set appArmorProfile.type to ${quoted(badValues)})`;
};

const capabilitiesBaseline: Check = (_spec, containers) => {
  const added = [
    ...new Set(
      containers
        .flatMap((container) => container.securityContext?.capabilities?.add ?? [])
        .filter((capability) => !BASELINE_CAPABILITIES.has(capability)),
    ),
  ];
  const found = containers.filter((container) =>
    (container.securityContext?.capabilities?.add ?? []).some((capability) => !BASELINE_CAPABILITIES.has(capability)),
  );
  return found.length
    ? `non-default capabilities (${containersNamed(found)} must not include ${quoted(added)} in securityContext.capabilities.add)`
    : undefined;
};

const capabilitiesRestricted: Check = (_spec, containers) => {
  const details: string[] = [];
  const notDropping = containers.filter((container) => !(container.securityContext?.capabilities?.drop ?? []).includes('ALL'));
  if (notDropping.length) details.push(`${containersNamed(notDropping)} must set securityContext.capabilities.drop=["ALL"]`);
  const adding = containers.filter((container) =>
    (container.securityContext?.capabilities?.add ?? []).some((capability) => capability !== 'NET_BIND_SERVICE'),
  );
  const added = [
    ...new Set(
      adding.flatMap((container) =>
        container.securityContext!.capabilities!.add!.filter((capability) => capability !== 'NET_BIND_SERVICE'),
      ),
    ),
  ];
  if (adding.length) details.push(`${containersNamed(adding)} must not include ${quoted(added)} in securityContext.capabilities.add`);
  return details.length ? `unrestricted capabilities (${details.join('; ')})` : undefined;
};

const hostNamespaces: Check = (spec) => {
  const set = (['hostNetwork', 'hostPID', 'hostIPC'] as const).filter((field) => spec[field]).map((field) => `${field}=true`);
  return set.length ? `host namespaces (${set.join(', ')})` : undefined;
};

const hostPathVolumes: Check = (spec) => {
  const names = (spec.volumes ?? []).filter((volume) => volume.hostPath).map((volume) => volume.name);
  return names.length ? `hostPath volumes (${volumesNamed(names)})` : undefined;
};

const hostPorts: Check = (_spec, containers) => {
  const found = containers.filter((container) => (container.ports ?? []).some((port) => port.hostPort));
  const ports = found.flatMap((container) => (container.ports ?? []).flatMap((port) => (port.hostPort ? [port.hostPort] : [])));
  if (found.length === 0) return undefined;
  return `hostPort (${containersNamed(found)} ${found.length === 1 ? 'uses' : 'use'} ${ports.length === 1 ? 'hostPort' : 'hostPorts'} ${ports.join(', ')})`;
};

const privileged: Check = (_spec, containers) => {
  const found = containers.filter((container) => container.securityContext?.privileged);
  return found.length ? `privileged (${containersNamed(found)} must not set securityContext.privileged=true)` : undefined;
};

const procMount: Check = (_spec, containers) => {
  const found = containers.filter((container) => (container.securityContext?.procMount ?? 'Default') !== 'Default');
  if (found.length === 0) return undefined;
  const types = [...new Set(found.map((container) => container.securityContext!.procMount!))].sort();
  return `procMount (${containersNamed(found)} must not set securityContext.procMount to ${quoted(types)})`;
};

const restrictedVolumes: Check = (spec) => {
  const details = (spec.volumes ?? []).flatMap((volume) => {
    const kind = Object.keys(volume).find((key) => key !== 'name');
    return kind && !RESTRICTED_VOLUMES.has(kind) ? [`volume "${volume.name}" uses restricted volume type "${kind}"`] : [];
  });
  return details.length ? `restricted volume types (${details.join('; ')})` : undefined;
};

const runAsNonRoot: Check = (spec, containers) => {
  if (spec.securityContext?.runAsNonRoot === false) return 'runAsNonRoot != true (pod must not set securityContext.runAsNonRoot=false)';
  const explicitFalse = containers.filter((container) => container.securityContext?.runAsNonRoot === false);
  if (explicitFalse.length)
    return `runAsNonRoot != true (${containersNamed(explicitFalse)} must not set securityContext.runAsNonRoot=false)`;
  if (spec.securityContext?.runAsNonRoot) return undefined;
  const unset = containers.filter((container) => container.securityContext?.runAsNonRoot !== true);
  return unset.length ? `runAsNonRoot != true (pod or ${containersNamed(unset)} must set securityContext.runAsNonRoot=true)` : undefined;
};

const runAsUser: Check = (spec, containers) => {
  if (spec.securityContext?.runAsUser === 0) return 'runAsUser=0 (pod must not set runAsUser=0)';
  const found = containers.filter((container) => container.securityContext?.runAsUser === 0);
  return found.length ? `runAsUser=0 (${containersNamed(found)} must not set runAsUser=0)` : undefined;
};

const seLinuxOptions: Check = (spec, containers) => {
  const badTypes = new Set<string>();
  let user = false;
  let role = false;
  const valid = (options: SecurityContext['seLinuxOptions']) => {
    if (!options) return true;
    const typeOk = SELINUX_TYPES.has(options.type ?? '');
    if (!typeOk) badTypes.add(options.type!);
    user ||= Boolean(options.user);
    role ||= Boolean(options.role);
    return typeOk && !options.user && !options.role;
  };
  const setters: string[] = [];
  if (!valid(spec.securityContext?.seLinuxOptions)) setters.push('pod');
  const found = containers.filter((container) => !valid(container.securityContext?.seLinuxOptions));
  if (found.length) setters.push(containersNamed(found));
  if (setters.length === 0) return undefined;
  const problems = [
    ...(badTypes.size ? [`${plural(badTypes.size, 'type', 'types')} ${quoted([...badTypes].sort())}`] : []),
    ...(user ? ['user may not be set'] : []),
    ...(role ? ['role may not be set'] : []),
  ];
  return `seLinuxOptions (${setters.join(' and ')} set forbidden securityContext.seLinuxOptions: ${problems.join('; ')})`;
};

const seccompBaseline: Check = (spec, containers) => {
  if (spec.securityContext?.seccompProfile?.type === 'Unconfined')
    return 'seccompProfile (pod must not set securityContext.seccompProfile.type to "Unconfined")';
  const found = containers.filter((container) => container.securityContext?.seccompProfile?.type === 'Unconfined');
  return found.length
    ? `seccompProfile (${containersNamed(found)} must not set securityContext.seccompProfile.type to "Unconfined")`
    : undefined;
};

const seccompRestricted: Check = (spec, containers) => {
  const allowed = (type: string | undefined) => type === 'RuntimeDefault' || type === 'Localhost';
  if (spec.securityContext?.seccompProfile?.type === 'Unconfined') return seccompBaseline(spec, containers, {});
  const podSet = allowed(spec.securityContext?.seccompProfile?.type);
  const found = containers.filter((container) =>
    container.securityContext?.seccompProfile?.type === undefined ? !podSet : !allowed(container.securityContext.seccompProfile.type),
  );
  if (found.length === 0) return undefined;
  return `seccompProfile (${podSet ? '' : 'pod or '}${containersNamed(found)} must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")`;
};

const sysctls: Check = (spec) => {
  const forbidden = (spec.securityContext?.sysctls ?? []).map((sysctl) => sysctl.name).filter((name) => !SAFE_SYSCTLS.has(name));
  return forbidden.length ? `forbidden sysctls (${forbidden.join(', ')})` : undefined;
};

/**
 * The checks of each level, in the order of their ids. Restricted holds baseline's but those its own
 * checks override (capabilities_restricted, restrictedVolumes and seccompProfile_restricted replace
 * capabilities_baseline, hostPathVolumes and seccompProfile_baseline).
 */
const CHECKS: Record<Exclude<Level, 'privileged'>, Check[]> = {
  baseline: [
    appArmorProfile,
    capabilitiesBaseline,
    hostNamespaces,
    hostPathVolumes,
    hostPorts,
    privileged,
    procMount,
    seLinuxOptions,
    seccompBaseline,
    sysctls,
  ],
  restricted: [
    allowPrivilegeEscalation,
    appArmorProfile,
    capabilitiesRestricted,
    hostNamespaces,
    hostPorts,
    privileged,
    procMount,
    restrictedVolumes,
    runAsNonRoot,
    runAsUser,
    seLinuxOptions,
    seccompRestricted,
    sysctls,
  ],
};

/** What a pod (its metadata and spec, or a template's) breaks of a level: `reason (detail)` per failed check. */
export function podSecurityViolations(level: string, pod: { metadata?: KubeObject['metadata']; spec?: unknown }): string[] {
  if (level !== 'baseline' && level !== 'restricted') return [];
  const spec = (pod.spec ?? {}) as PodSpec;
  const containers = [...(spec.initContainers ?? []), ...(spec.containers ?? [])];
  const annotations = pod.metadata?.annotations ?? {};
  return CHECKS[level].map((check) => check(spec, containers, annotations)).filter((found): found is string => Boolean(found));
}

/** Enforce (403) and warn (the Warning headers returned) for a pod created in a namespace with these labels. */
export function admitPodSecurity(namespaceLabels: Record<string, string>, pod: KubeObject): string[] {
  const enforce = namespaceLabels['pod-security.kubernetes.io/enforce'];
  if (enforce) {
    const violations = podSecurityViolations(enforce, pod);
    if (violations.length) {
      throw new KubeStatusError(
        403,
        'Forbidden',
        `pods "${pod.metadata.name}" is forbidden: violates PodSecurity "${enforce}:latest": ${violations.join(', ')}`,
        { name: pod.metadata.name, kind: 'pods' },
      );
    }
  }
  const warn = namespaceLabels['pod-security.kubernetes.io/warn'];
  const warned = warn ? podSecurityViolations(warn, pod) : [];
  return warned.length ? [`would violate PodSecurity "${warn}:latest": ${warned.join(', ')}`] : [];
}

/** The pod template of a workload resource, where Pod Security looks for it. */
const TEMPLATES: Record<string, (object: KubeObject) => unknown> = {
  'apps/deployments': (object) => (object.spec as { template?: unknown } | undefined)?.template,
  'apps/replicasets': (object) => (object.spec as { template?: unknown } | undefined)?.template,
  'apps/statefulsets': (object) => (object.spec as { template?: unknown } | undefined)?.template,
  'apps/daemonsets': (object) => (object.spec as { template?: unknown } | undefined)?.template,
  'batch/jobs': (object) => (object.spec as { template?: unknown } | undefined)?.template,
};

/** Warn mode for a workload's pod template (the returned Warning headers); enforce never refuses one. */
export function warnPodTemplate(namespaceLabels: Record<string, string>, storageKey: string, object: KubeObject): string[] {
  // Without a warn label, warn defaults to an explicit enforce level (api.PolicyToEvaluate), so a
  // Deployment in an enforcing namespace warns of the pods it would have refused.
  const warn = namespaceLabels['pod-security.kubernetes.io/warn'] ?? namespaceLabels['pod-security.kubernetes.io/enforce'];
  const template = TEMPLATES[storageKey]?.(object) as { metadata?: KubeObject['metadata']; spec?: unknown } | undefined;
  if (!warn || !template) return [];
  const warned = podSecurityViolations(warn, template);
  return warned.length ? [`would violate PodSecurity "${warn}:latest": ${warned.join(', ')}`] : [];
}
