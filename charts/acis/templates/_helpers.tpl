{{/* Names, labels and shared fragments of the chart's templates. */}}

{{- define "acis.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The prefix of every object name: the release name, plus the chart's name unless it is in it. */}}
{{- define "acis.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Labels of every object; `component` names the process. */}}
{{- define "acis.labels" -}}
{{ include "acis.selectorLabels" . }}
app.kubernetes.io/part-of: acis
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "acis.selectorLabels" -}}
app.kubernetes.io/name: {{ include "acis.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* The labels the controller puts on runner pods (controller/api/v1alpha1.ts): a contract. */}}
{{- define "acis.runnerPodLabels" -}}
app.kubernetes.io/managed-by: acis-controller
app.kubernetes.io/component: runner
{{- end -}}

{{/* And on repository-sync Job pods (controller/reposync-decisions.ts). */}}
{{- define "acis.syncPodLabels" -}}
app.kubernetes.io/managed-by: acis-controller
app.kubernetes.io/component: repository-sync
{{- end -}}

{{- define "acis.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "acis.runnerImage" -}}
{{- printf "%s:%s" .Values.runnerImage.repository (default .Chart.AppVersion .Values.runnerImage.tag) -}}
{{- end -}}

{{- define "acis.databaseSecret" -}}
{{- if .Values.database.existingSecret -}}
{{- .Values.database.existingSecret -}}
{{- else -}}
{{- printf "%s-database" (include "acis.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "acis.secretsName" -}}
{{- if .Values.secrets.existingSecret -}}
{{- .Values.secrets.existingSecret -}}
{{- else -}}
{{- printf "%s-secrets" (include "acis.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- /* Runner pods query the cluster DNS: only when asked, and never when they reach the proxy by a fixed ClusterIP. */ -}}
{{- define "acis.sandboxDns" -}}
{{- ternary "1" "0" (and .Values.networkPolicy.sandboxDns (not .Values.egressProxy.clusterIP)) -}}
{{- end -}}

{{- /* Qualified by namespace: runner pods (with sandbox DNS on) resolve it from the sandbox namespace. */ -}}
{{- define "acis.egressProxyHost" -}}
{{- default (printf "%s-egress-proxy.%s.svc" (include "acis.fullname" .) .Release.Namespace) .Values.egressProxy.clusterIP -}}
{{- end -}}

{{- /* The ConfigMap (key ca.crt) of the egress proxy CA runner pods trust: the API server publishes its
proxy's there in mode api-server; in mode deployment the operator's (`ca.configMap`), else the chart's
of the CA it generates; with a CA of the operator's and no ConfigMap named, none. */ -}}
{{- define "acis.egressCaConfigMap" -}}
{{- if eq .Values.egressProxy.mode "api-server" -}}
{{- printf "%s-egress-ca" (include "acis.fullname" .) -}}
{{- else if .Values.egressProxy.ca.configMap -}}
{{- .Values.egressProxy.ca.configMap -}}
{{- else if not .Values.egressProxy.ca.existingSecret -}}
{{- printf "%s-egress-ca" (include "acis.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* The Secret (ca.crt, ca.key) of the egress proxy's deployment CA: the operator's, else the chart's. */}}
{{- define "acis.egressCaSecret" -}}
{{- default (printf "%s-egress-ca-key" (include "acis.fullname" .)) .Values.egressProxy.ca.existingSecret -}}
{{- end -}}

{{/* The CA the chart generates (mode deployment without ca.existingSecret), as JSON {"ca.crt", "ca.key"}
in PEM: the one stored at install, else a new ECDSA P-256 CA. Made once per render, as the Secret, the
ConfigMap and the proxy's checksum must agree. */}}
{{- define "acis.generatedEgressCa" -}}
{{- if not (hasKey .Values.egressProxy.ca "generated") -}}
{{- $existing := (lookup "v1" "Secret" .Release.Namespace (include "acis.egressCaSecret" .)).data | default dict -}}
{{- if and (hasKey $existing "ca.crt") (hasKey $existing "ca.key") -}}
{{- $_ := set .Values.egressProxy.ca "generated" (dict "ca.crt" (get $existing "ca.crt" | b64dec) "ca.key" (get $existing "ca.key" | b64dec)) -}}
{{- else -}}
{{- $ca := genCAWithKey "ACIS egress proxy CA" 3650 (genPrivateKey "ecdsa") -}}
{{- $_ := set .Values.egressProxy.ca "generated" (dict "ca.crt" $ca.Cert "ca.key" $ca.Key) -}}
{{- end -}}
{{- end -}}
{{- toJson .Values.egressProxy.ca.generated -}}
{{- end -}}

{{- define "acis.leaseName" -}}
{{- printf "%s-controller" (include "acis.fullname" .) -}}
{{- end -}}

{{/* Pod-level security context: Pod Security Standard `restricted`. */}}
{{- define "acis.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .uid }}
runAsGroup: {{ .uid }}
fsGroup: {{ .uid }}
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* Container-level security context: `restricted`, plus a read-only root filesystem. */}}
{{- define "acis.containerSecurityContext" -}}
runAsNonRoot: true
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
privileged: false
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* The pod template's annotations: Prometheus scraping of `.port` when asked for, and checksums of
the chart's secret values and of the egress CA certificate `.egressCaCert` (if given), so that changing
one rolls the pods that read it. */}}
{{- define "acis.podAnnotations" -}}
annotations:
  {{- if .root.Values.metrics.annotations }}
  prometheus.io/scrape: "true"
  prometheus.io/port: {{ .port | quote }}
  prometheus.io/path: /metrics
  {{- end }}
  checksum/secrets: {{ include "acis.secretValuesChecksum" .root }}
  {{- with .egressCaCert }}
  checksum/egress-ca: {{ . | sha256sum }}
  {{- end }}
{{- end -}}

{{/* A digest of the values the chart writes into Secrets (not of generated ones, which are kept). */}}
{{- define "acis.secretValuesChecksum" -}}
{{- toJson (list .Values.secrets .Values.database.url .Values.database.existingSecret .Values.postgresql.password) | sha256sum -}}
{{- end -}}

{{/* An env entry from the chart's (or the user's) Secret; optional ones may be absent. */}}
{{- define "acis.secretEnv" -}}
- name: {{ .key }}
  valueFrom:
    secretKeyRef:
      name: {{ include "acis.secretsName" .root }}
      key: {{ .key }}
      {{- if .optional }}
      optional: true
      {{- end }}
{{- end -}}

{{/* Egress to the cluster DNS (networkPolicy.dns): its pods by the two selectors, its addresses, on
its ports over UDP and TCP, as a NetworkPolicyEgressRule. */}}
{{- define "acis.dnsEgressRule" -}}
{{- $dns := .Values.networkPolicy.dns -}}
{{- $pods := dict -}}
{{- with $dns.namespaceSelector }}{{ $_ := set $pods "namespaceSelector" . }}{{ end -}}
{{- with $dns.podSelector }}{{ $_ := set $pods "podSelector" . }}{{ end -}}
{{- if not (or $pods $dns.ipBlocks) -}}
{{- fail "networkPolicy.dns: name the cluster DNS by namespaceSelector/podSelector or ipBlocks (a rule without either would let DNS ports reach anywhere)" -}}
{{- end -}}
- to:
    {{- with $pods }}
    - {{ toYaml . | nindent 6 | trim }}
    {{- end }}
    {{- range $dns.ipBlocks }}
    - ipBlock: { cidr: {{ . }} }
    {{- end }}
  ports:
    {{- range $dns.ports }}
    - { protocol: UDP, port: {{ . }} }
    - { protocol: TCP, port: {{ . }} }
    {{- end }}
{{- end -}}

{{/* Egress to the internet on `.ports` (all ports if empty): everything but the cluster, private
and link-local ranges, per address family. */}}
{{- define "acis.internetEgressRule" -}}
{{- $denied := concat .root.Values.networkPolicy.clusterCIDRs .root.Values.networkPolicy.deniedCIDRs -}}
{{- $v4 := list -}}
{{- $v6 := list -}}
{{- range $denied -}}
{{- if contains ":" . }}{{ $v6 = append $v6 . }}{{ else }}{{ $v4 = append $v4 . }}{{ end -}}
{{- end -}}
- to:
    - ipBlock:
        cidr: 0.0.0.0/0
        {{- with $v4 }}
        except:{{ toYaml . | nindent 10 }}
        {{- end }}
    - ipBlock:
        cidr: ::/0
        {{- with $v6 }}
        except:{{ toYaml . | nindent 10 }}
        {{- end }}
  {{- with .ports }}
  ports:
    {{- range . }}
    - { protocol: TCP, port: {{ . }} }
    {{- end }}
  {{- end }}
{{- end -}}

{{/* Egress on `.ports` to `.peers`, or to any address when there are none. */}}
{{- define "acis.peersEgressRule" -}}
- {{- with .peers }}
  to: {{ toYaml . | nindent 4 }}
  {{- end }}
  ports:
    {{- range .ports }}
    - { protocol: TCP, port: {{ . }} }
    {{- end }}
{{- end -}}

{{/* Egress to PostgreSQL: the configured peers, else the trial PostgreSQL's pods, else anywhere. */}}
{{- define "acis.databaseEgressRule" -}}
{{- $peers := .Values.networkPolicy.database -}}
{{- if and (not $peers) .Values.postgresql.enabled -}}
{{- $peers = list (dict "podSelector" (dict "matchLabels" (fromYaml (include "acis.selectorLabels" (dict "root" . "component" "postgresql"))))) -}}
{{- end -}}
{{ include "acis.peersEgressRule" (dict "peers" $peers "ports" .Values.networkPolicy.databasePorts) }}
{{- end -}}

{{- /* "true" when the render sees a cluster: `lookup` of a list answers a list there (empty in a namespace
not yet made, as with --create-namespace), and an empty map in a render without one (helm template,
Argo CD, --dry-run=client). Secrets, as helm itself lists them in the release's namespace to store
releases; looked up only when a generated value is not found. */ -}}
{{- define "acis.clusterSeen" -}}
{{- if hasKey (lookup "v1" "Secret" .Release.Namespace "") "items" -}}true{{- end -}}
{{- end -}}

{{/* The trial PostgreSQL's password: the value, else the one stored at install, else a new one. */}}
{{- define "acis.postgresqlPassword" -}}
{{- if .Values.postgresql.password -}}
{{- .Values.postgresql.password -}}
{{- else -}}
{{- $name := printf "%s-postgresql" (include "acis.fullname" .) -}}
{{- $existing := (lookup "v1" "Secret" .Release.Namespace $name).data | default dict -}}
{{- if hasKey $existing "POSTGRES_PASSWORD" -}}
{{- get $existing "POSTGRES_PASSWORD" | b64dec -}}
{{- else -}}
{{- /* Generated once per render: the database Secret and PostgreSQL's own read the same value. */ -}}
{{- if not (hasKey .Values.postgresql "generatedPassword") -}}
{{- $_ := set .Values.postgresql "generatedPassword" (randAlphaNum 32) -}}
{{- end -}}
{{- .Values.postgresql.generatedPassword -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The component whose pods serve the egress proxy: its own Deployment, or the API server. */}}
{{- define "acis.egressProxyComponent" -}}
{{- ternary "egress-proxy" "api-server" (eq .Values.egressProxy.mode "deployment") -}}
{{- end -}}

{{/* The Secret (key `token`) of the egress resolve token: the operator's, else the chart's. */}}
{{- define "acis.egressResolveSecret" -}}
{{- default (printf "%s-egress-resolve" (include "acis.fullname" .)) .Values.egressProxy.resolve.existingSecret -}}
{{- end -}}

{{/* Where the resolve token's Secret is mounted in the API server and the egress proxy. */}}
{{- define "acis.egressResolveTokenDir" -}}
/etc/acis/egress-resolve
{{- end -}}

{{- /* Where runner pods, sync Jobs and everything owning or owned by them live (values.yaml, sandboxNamespace). */ -}}
{{- define "acis.sandboxNamespace" -}}
{{- default (printf "%s-sandboxes" .Release.Name) .Values.sandboxNamespace.name -}}
{{- end -}}
