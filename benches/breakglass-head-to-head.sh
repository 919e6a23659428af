#!/bin/bash
# The plain forward webhook (A) against the same webhook with KEP-3716's breakglass
# matchCondition (B), same binary, its `authorizer` check answered by a stand-in API server
# (benches/sar-stand-in.py, "not allowed") and then from the cache.
# Run in the directory of "Setup (reproduce)" (cert.pem, key.pem, conf/, the stand-in backend
# on :19443). Usage: breakglass-head-to-head.sh BINARY [RUNS]
set -eu
B=$1; RUNS=${2:-3}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p conf-authz
sed '/^- name: skip.bench.example.com/,$d' conf/w.yaml > conf-authz/w.yaml
cat >> conf-authz/w.yaml <<'YAML'
  matchConditions:
  - name: breakglass
    expression: "!authorizer.group('admissionregistration.k8s.io').resource('validatingwebhookconfigurations').name('my-webhook').check('breakglass').allowed()"
YAML
cat > kubeconfig-sar <<'YAML'
apiVersion: v1
kind: Config
clusters: [{name: sar, cluster: {server: "http://127.0.0.1:19700"}}]
users: [{name: proxy, user: {token: bench}}]
contexts: [{name: sar, context: {cluster: sar, user: proxy}}]
current-context: sar
YAML
setsid python3 "$HERE/sar-stand-in.py" 2> sar.log &
setsid "$B" serve --config conf --listen 127.0.0.1:19601 --tls-cert-file cert.pem --tls-private-key-file key.pem > h2h-a.log 2>&1 &
setsid "$B" serve --config conf-authz --listen 127.0.0.1:19602 --tls-cert-file cert.pem --tls-private-key-file key.pem \
  --authorizer subjectaccessreview --kubeconfig kubeconfig-sar --authorizer-cache-unauthorized-ttl 1h > h2h-b.log 2>&1 &
sleep 2
PA=$(pgrep -f "$B serve --config conf --listen 127.0.0.1:19601" | head -1)
PB=$(pgrep -f "$B serve --config conf-authz --listen 127.0.0.1:19602" | head -1)
BIN=$B python3 "$HERE/head-to-head.py" https://127.0.0.1:19601/webhooks/forward.bench.example.com "$PA" \
  https://127.0.0.1:19602/webhooks/forward.bench.example.com "$PB" "$RUNS" || true
kill "$PA" "$PB"
pkill -f sar-stand-in.py || true
echo "SubjectAccessReviews answered: $(grep -c sar sar.log)"
