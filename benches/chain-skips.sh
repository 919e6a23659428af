#!/bin/bash
# The bar: a chain of five webhooks that all skip the request costs about what one
# skipping webhook costs. One binary serves a configuration `five-skips` (five webhooks whose
# rules name another resource) and `one-skip` (one such webhook); the Pod review goes to
# /configurations/validating/five-skips (A) and /configurations/validating/one-skip (B):
# `bench` side by side (latency, interleaved rounds), then head-to-head.py on two processes
# (CPU per request). Run in the directory of "Setup (reproduce)" (cert.pem, key.pem, conf/ for
# its caBundle). Usage: chain-skips.sh BINARY [RUNS]
set -eu
B=$1; RUNS=${2:-3}
HERE=$(cd "$(dirname "$0")" && pwd)
CA=$(grep -o 'caBundle: "[^"]*"' conf/w.yaml | head -1)
mkdir -p conf-chains
{
  for chain in one-skip:1 five-skips:5; do
    name=${chain%%:*}; n=${chain##*:}
    printf -- '---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {name: %s}\nwebhooks:\n' "$name"
    for i in $(seq 1 "$n"); do
      printf -- '- name: skip-%s.%s.bench.example.com\n  clientConfig: {url: "https://127.0.0.1:19443/allow", %s}\n' "$i" "$name" "$CA"
      printf -- '  rules: [{operations: [CREATE, UPDATE], apiGroups: [example.com], apiVersions: [v1], resources: [widgets%s]}]\n' "$i"
      printf -- '  sideEffects: None\n  admissionReviewVersions: [v1]\n'
    done
  done
} > conf-chains/c.yaml
REVIEW="$HERE/../tests/fixtures/admission-reviews/0096-create-core-v1-pods-v1.json"
setsid "$B" serve --config conf-chains --listen 127.0.0.1:19601 --tls-cert-file cert.pem --tls-private-key-file key.pem > h2h-a.log 2>&1 &
setsid "$B" serve --config conf-chains --listen 127.0.0.1:19602 --tls-cert-file cert.pem --tls-private-key-file key.pem > h2h-b.log 2>&1 &
sleep 2
PA=$(pgrep -f "$B serve --config conf-chains --listen 127.0.0.1:19601" | head -1)
PB=$(pgrep -f "$B serve --config conf-chains --listen 127.0.0.1:19602" | head -1)
"$B" bench --target https://127.0.0.1:19601/configurations/validating/five-skips \
  --compare https://127.0.0.1:19601/configurations/validating/one-skip \
  --reviews "$REVIEW" --cacert cert.pem --rate 1000 --duration 20 2>/dev/null | tail -9 || true
BIN=$B CERT="$PWD/cert.pem" REVIEWS="$REVIEW" python3 "$HERE/head-to-head.py" https://127.0.0.1:19601/configurations/validating/five-skips "$PA" \
  https://127.0.0.1:19602/configurations/validating/one-skip "$PB" "$RUNS" || true
kill "$PA" "$PB"
