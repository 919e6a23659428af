#!/bin/bash
# The SubjectAccessReview cache's memory under large users (docs/operating.md, "Memory: sizing the
# sidecar's limit"): a `serve` with `--authorizer`, a stand-in API server answering every review
# "not allowed" (benches/sar-stand-in.py on 127.0.0.1:19700), and sar-cache-memory.py sending
# 260 reviews of distinct 20,000-group users. Run in the directory of benches/README.md
# "Setup (reproduce)" (cert.pem, key.pem). Usage: sar-cache-memory.sh BINARY [REVIEWS] [GROUPS]
set -eu
B=$1; REVIEWS=${2:-260}; GROUPS_=${3:-20000}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p conf-sar
cat > conf-sar/w.yaml <<'YAML'
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: sar-memory}
webhooks:
- name: breakglass.bench.example.com
  clientConfig: {url: "https://127.0.0.1:9/never"}
  rules: [{operations: ["*"], apiGroups: ["*"], apiVersions: ["*"], resources: ["*/*"]}]
  sideEffects: None
  admissionReviewVersions: [v1]
  matchConditions:
  - name: only-breakglass
    expression: "authorizer.group('admissionregistration.k8s.io').resource('validatingwebhookconfigurations').name('my-webhook').check('breakglass').allowed()"
YAML
cat > kubeconfig-sar <<'YAML'
apiVersion: v1
kind: Config
clusters: [{name: sar, cluster: {server: "http://127.0.0.1:19700"}}]
users: [{name: proxy, user: {token: bench}}]
contexts: [{name: sar, context: {cluster: sar, user: proxy}}]
current-context: sar
YAML
python3 "$HERE/sar-stand-in.py" 2> sar.log &
SAR=$!
"$B" serve --config conf-sar --listen 127.0.0.1:19603 --tls-cert-file cert.pem --tls-private-key-file key.pem \
  --authorizer subjectaccessreview --kubeconfig kubeconfig-sar > sar-memory.log 2>&1 &
P=$!
for _ in $(seq 50); do grep -q "listening" sar-memory.log 2>/dev/null && break; sleep 0.1; done
python3 "$HERE/sar-cache-memory.py" https://127.0.0.1:19603/webhooks/breakglass.bench.example.com "$P" "$REVIEWS" "$GROUPS_" || true
kill "$P" "$SAR"
wait "$P" "$SAR" 2>/dev/null || true
echo "SubjectAccessReviews answered: $(grep -c sar sar.log)"
