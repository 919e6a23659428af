// Validates Prometheus Operator objects (a JSON array on stdin) against the Operator's CRD
// schemas as published by @kubernetes-models/prometheus-operator; prints one line per object,
// exits 1 on any failure. Called by check-monitoring.py (deploy/monitoring).
import * as operator from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1";

const input = await new Promise((resolve) => {
  let text = "";
  process.stdin.on("data", (chunk) => (text += chunk));
  process.stdin.on("end", () => resolve(text));
});
let failed = 0;
for (const object of JSON.parse(input)) {
  const where = `${object.kind} ${object.metadata?.namespace ?? ""}/${object.metadata?.name}`;
  const Model = operator[object.kind];
  if (object.apiVersion !== "monitoring.coreos.com/v1" || !Model) {
    console.log(`FAIL ${where}: no monitoring.coreos.com/v1 schema for ${object.apiVersion} ${object.kind}`);
    failed++;
    continue;
  }
  try {
    new Model(object).validate();
    console.log(`ok   ${where} (monitoring.coreos.com/v1 schema)`);
  } catch (e) {
    console.log(`FAIL ${where}: ${e.message}`);
    failed++;
  }
}
process.exit(failed ? 1 : 0);
