#!/usr/bin/env bash
# The Kubernetes manifests in deploy/k8s/ pass
#   kubectl apply --dry-run=client --validate=false
# (issue 20). A client-side dry run still asks an API server which kinds
# exist (discovery) before it maps manifests to resources; with no cluster
# here, a loopback server answers exactly that — the core and apps groups'
# discovery documents, nothing else — and every other request fails.
#
# Installs Debian's kubernetes-client when no kubectl is on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v kubectl >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends --no-upgrade kubernetes-client
fi
kubectl version --client 2>&1 | sed -n 1p
work="$(mktemp -d)"
cat >"$work/discovery.py" <<'PY'
import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer

def resources(*items):
    return [{"name": n, "singularName": s, "namespaced": True, "kind": k,
             "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]}
            for n, s, k in items]

DOCS = {
    "/api": {"kind": "APIVersions", "versions": ["v1"],
             "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]},
    "/api/v1": {"kind": "APIResourceList", "groupVersion": "v1", "resources": resources(
        ("configmaps", "configmap", "ConfigMap"), ("secrets", "secret", "Secret"),
        ("services", "service", "Service"))},
    "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": [{
        "name": "apps", "versions": [{"groupVersion": "apps/v1", "version": "v1"}],
        "preferredVersion": {"groupVersion": "apps/v1", "version": "v1"}}]},
    "/apis/apps/v1": {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "apps/v1",
                      "resources": resources(("deployments", "deployment", "Deployment"))},
}

class H(BaseHTTPRequestHandler):
    def do_GET(self):
        doc = DOCS.get(self.path.split("?")[0])
        body = json.dumps(doc if doc else {"kind": "Status", "code": 404}).encode()
        self.send_response(200 if doc else 404)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass

srv = HTTPServer(("127.0.0.1", 0), H)
open(sys.argv[1], "w").write(str(srv.server_address[1]))
srv.serve_forever()
PY
python3 "$work/discovery.py" "$work/port" &
pid=$!
trap 'kill $pid 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 50); do [[ -s "$work/port" ]] && break; sleep 0.1; done
out="$(kubectl --server "http://127.0.0.1:$(cat "$work/port")" --kubeconfig /dev/null \
    apply --dry-run=client --validate=false -f deploy/k8s/ 2>&1)"
echo "$out"
n_files=$(ls deploy/k8s/*.yaml | wc -l)
n_ok=$(grep -c "(dry run)" <<<"$out" || true)
if [[ "$n_ok" -ne "$n_files" ]]; then
    echo "k8s.sh: $n_ok of $n_files manifests passed the client dry run" >&2
    exit 1
fi
echo "k8s.sh: all $n_files manifests pass kubectl apply --dry-run=client --validate=false"
