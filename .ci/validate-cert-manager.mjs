// Validates cert-manager objects (a JSON array on stdin) against cert-manager's CRD schemas as
// published by @kubernetes-models/cert-manager; prints one line per object, exits 1 on any
// failure. Called by validate-manifests.py.
import * as certManager from "@kubernetes-models/cert-manager/cert-manager.io/v1";

const input = await new Promise((resolve) => {
  let text = "";
  process.stdin.on("data", (chunk) => (text += chunk));
  process.stdin.on("end", () => resolve(text));
});
let failed = 0;
for (const object of JSON.parse(input)) {
  const where = `${object.kind} ${object.metadata?.namespace ?? ""}/${object.metadata?.name}`;
  const Model = certManager[object.kind];
  if (object.apiVersion !== "cert-manager.io/v1" || !Model) {
    console.log(`FAIL ${where}: no cert-manager.io/v1 schema for ${object.apiVersion} ${object.kind}`);
    failed++;
    continue;
  }
  try {
    new Model(object).validate();
    console.log(`ok   ${where} (cert-manager.io/v1 schema)`);
  } catch (e) {
    console.log(`FAIL ${where}: ${e.message}`);
    failed++;
  }
}
process.exit(failed ? 1 : 0);
