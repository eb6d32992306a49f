#!/usr/bin/env bash
# From a laptop to ACIS on a local Kubernetes cluster: creates a kind cluster (if absent), builds
# the acis, runner and model-stub images and loads them into it, installs the chart with the trial
# PostgreSQL and the model stub as the model endpoint, then runs the demo (npm run demo) against it
# through port-forwards. Needs Docker with BuildKit (buildx), kind, kubectl, helm, openssl, curl and
# Node (npm ci done). Re-running it upgrades in place. hack/kind-down.sh deletes the cluster.
#
#   ACIS_KIND_CLUSTER        kind cluster name (default acis)
#   ACIS_NAMESPACE           namespace of the release (default acis)
#   ACIS_API_PORT            local port forwarded to the API (default 8080)
#   ACIS_READY_TIMEOUT       seconds to wait for the API's /readyz through the port-forward (default 120)
set -euo pipefail

cluster="${ACIS_KIND_CLUSTER:-acis}"
namespace="${ACIS_NAMESPACE:-acis}"
api_port="${ACIS_API_PORT:-8080}"
ready_timeout="${ACIS_READY_TIMEOUT:-120}"
cd "$(dirname "$0")/.."

tools=(docker kind kubectl helm openssl curl npm)
for tool in "${tools[@]}"; do
  command -v "$tool" >/dev/null || { echo "kind-up: $tool is needed on PATH" >&2; exit 1; }
done
# The images are built with BuildKit: the model stub's Dockerfile has an ignore file of its own
# (<Dockerfile>.dockerignore), which only BuildKit reads.
docker buildx version >/dev/null 2>&1 || { echo "kind-up: Docker's buildx (BuildKit) is needed" >&2; exit 1; }

# The account of some DaemonSet (where network plugins run) that may watch NetworkPolicies, if any:
# a plugin enforcing them must watch them (Calico, Cilium, kindnet since kind v0.24); one that does
# not (flannel, kindnet before v0.24) has no such right. A heuristic: any DaemonSet granted it counts.
network_policy_enforcer() {
  local account
  for account in $(kubectl get daemonsets --all-namespaces \
    -o jsonpath='{range .items[*]}{.metadata.namespace}:{.spec.template.spec.serviceAccountName}{"\n"}{end}' | sort -u); do
    if [ "$(kubectl auth can-i watch networkpolicies.networking.k8s.io --all-namespaces \
      --as="system:serviceaccount:$account" 2>/dev/null)" = yes ]; then
      echo "$account"
      return
    fi
  done
}

if ! kind get clusters | grep -qx "$cluster"; then
  kind create cluster --name "$cluster" --config hack/kind/cluster.yaml
fi
kubectl config use-context "kind-$cluster" >/dev/null
if [ -z "$(network_policy_enforcer)" ]; then
  echo "kind-up: warning: no network plugin of this cluster seems to enforce NetworkPolicies (kind before" \
    "v0.24, or a plugin without them): the chart's policies are written but confine nothing, runners" \
    "included. Use kind v0.24 or later, or install Calico or Cilium." >&2
fi

echo "== images"
docker buildx build --load -f images/acis/Dockerfile -t acis:dev .
docker buildx build --load -f images/runner/Dockerfile -t acis-runner:dev .
docker buildx build --load -f hack/kind/model-stub.Dockerfile -t acis-model-stub:dev .
kind load docker-image --name "$cluster" acis:dev acis-runner:dev acis-model-stub:dev

echo "== namespace (Pod Security: restricted) and the model stub"
kubectl create namespace "$namespace" --dry-run=client -o yaml | kubectl apply -f -
kubectl label namespace "$namespace" pod-security.kubernetes.io/enforce=restricted --overwrite
kubectl -n "$namespace" apply -f hack/kind/model-stub.yaml

# The demo's service key: the one of an earlier run if there is one.
service_key="$(kubectl -n "$namespace" get secret acis-secrets -o jsonpath='{.data.ACIS_BOOTSTRAP_SERVICE_KEY}' 2>/dev/null | base64 -d || true)"
service_key="${service_key:-sk_int_kind$(openssl rand -hex 16)}"

echo "== helm upgrade --install"
helm upgrade --install acis charts/acis --namespace "$namespace" \
  --values hack/kind/values.yaml --set secrets.bootstrapServiceKey="$service_key" \
  --wait --timeout 10m
kubectl -n "$namespace" rollout status deployment/acis-model-stub --timeout 5m

echo "== demo"
kubectl -n "$namespace" port-forward svc/acis-api "$api_port:80" >/dev/null &
forwards=$!
# The demo uses a model stub already listening on 127.0.0.1:8788: the cluster's, so the agents' calls land there.
kubectl -n "$namespace" port-forward svc/acis-model-stub 8788:8788 >/dev/null &
forwards="$forwards $!"
trap 'kill $forwards 2>/dev/null || true' EXIT
# Ready once /readyz answers through the port-forward (the API reached its database), within a bound.
deadline=$((SECONDS + ready_timeout))
until curl -fsS --max-time 5 "http://127.0.0.1:$api_port/readyz" >/dev/null 2>&1; do
  if [ "$SECONDS" -ge "$deadline" ]; then
    echo "kind-up: the API was not ready within ${ready_timeout} s (GET /readyz through the port-forward);" \
      "see kubectl -n $namespace get pods and kubectl -n $namespace logs deploy/acis-api" >&2
    exit 1
  fi
  sleep 1
done
DEMO_URL="http://127.0.0.1:$api_port" DEMO_SERVICE_KEY="$service_key" npm run demo

cat <<DONE

ACIS runs in kind cluster "$cluster", namespace "$namespace" (runner and sync pods: acis-sandboxes).
  kubectl -n $namespace get pods
  kubectl -n acis-sandboxes get pods,sbx,sbxpool,reposync
  kubectl -n $namespace port-forward svc/acis-api $api_port:80   # then http://127.0.0.1:$api_port
  service key: $service_key
  admin token: kubectl -n $namespace get secret acis-secrets -o jsonpath='{.data.ACIS_ADMIN_TOKEN}' | base64 -d
Remove it all with hack/kind-down.sh.
DONE
