// Validates custom resources (a JSON array on stdin) against their CRD schemas as published by
// @kubernetes-models (pinned in .ci/package-lock.json): cert-manager's (validate-manifests.py)
// and the Prometheus Operator's (check-monitoring.py). Prints one line per object, exits 1 on
// any failure, an object of another apiVersion or kind included.
const SCHEMAS = {
  "cert-manager.io/v1": "@kubernetes-models/cert-manager/cert-manager.io/v1",
  "monitoring.coreos.com/v1": "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1",
};

const input = await new Promise((resolve) => {
  let text = "";
  process.stdin.on("data", (chunk) => (text += chunk));
  process.stdin.on("end", () => resolve(text));
});
let failed = 0;
for (const object of JSON.parse(input)) {
  const where = `${object.kind} ${object.metadata?.namespace ?? ""}/${object.metadata?.name}`;
  const module = SCHEMAS[object.apiVersion];
  const Model = module && (await import(module))[object.kind];
  if (!Model) {
    console.log(`FAIL ${where}: no schema for ${object.apiVersion} ${object.kind}`);
    failed++;
    continue;
  }
  try {
    new Model(object).validate();
    console.log(`ok   ${where} (${object.apiVersion} schema)`);
  } catch (e) {
    console.log(`FAIL ${where}: ${e.message}`);
    failed++;
  }
}
process.exit(failed ? 1 : 0);
