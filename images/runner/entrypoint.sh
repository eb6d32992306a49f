#!/bin/sh
# Starts the runner. The root filesystem is read-only, so the egress proxy's CA cannot be added to
# the system store: when ACIS_EGRESS_CA_FILE exists, the system bundle plus that CA is written to
# $TMPDIR (the pod's /tmp) and every client the agent may use is pointed at it. Without the file,
# the system roots alone are trusted and HTTPS through the proxy fails closed (its leaf
# certificates do not verify), never open.
set -eu
mkdir -p "${HOME}"
if [ -r "${ACIS_EGRESS_CA_FILE:-}" ]; then
  bundle="${TMPDIR:-/tmp}/acis-ca-bundle.pem"
  system=/etc/ssl/certs/ca-certificates.crt
  { if [ -r "${system}" ]; then cat "${system}"; fi; cat "${ACIS_EGRESS_CA_FILE}"; } > "${bundle}"
  export SSL_CERT_FILE="${bundle}" CURL_CA_BUNDLE="${bundle}" GIT_SSL_CAINFO="${bundle}" \
    REQUESTS_CA_BUNDLE="${bundle}" NODE_EXTRA_CA_CERTS="${ACIS_EGRESS_CA_FILE}"
fi
exec node /app/dist/runner/runner.js "$@"
