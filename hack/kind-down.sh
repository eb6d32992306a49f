#!/usr/bin/env bash
# Deletes the kind cluster hack/kind-up.sh made (ACIS_KIND_CLUSTER, default acis), and everything in it.
set -euo pipefail
cluster="${ACIS_KIND_CLUSTER:-acis}"
command -v kind >/dev/null || { echo "kind-down: kind is needed on PATH" >&2; exit 1; }
kind delete cluster --name "$cluster"
