#!/usr/bin/env python3
"""Renders deploy/overlays/example with kubectl's Kustomize and validates every object:
Kubernetes kinds against the Kubernetes 1.32 OpenAPI schemas in strict mode (unknown fields
are errors) with kubernetes-validate, cert-manager kinds against cert-manager's CRD schemas
(validate-crd-objects.mjs). Also checks that the committed registration.yaml is what
`admission-proxy registration` prints for config/, and validates what `admission-proxy
registration --chain` prints for config/ the same strict way (it is not committed: the
example deploys the per-webhook registration). The binary is the debug build under
$CARGO_TARGET_DIR (default target/). Exit 1 on any problem."""

import json
import os
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import yaml

ROOT = Path(__file__).resolve().parent.parent
OVERLAY = ROOT / "deploy" / "overlays" / "example"
KUBERNETES = "1.32.0"


def main() -> int:
    rendered = subprocess.run(
        ["kubectl", "kustomize", "--load-restrictor", "LoadRestrictionsNone", str(OVERLAY)],
        check=True, capture_output=True, text=True,
    ).stdout
    objects = [o for o in yaml.safe_load_all(rendered) if o]
    failed = 0
    cert_manager = []
    for o in objects:
        where = f"{o['kind']} {o['metadata'].get('namespace', '')}/{o['metadata']['name']}"
        if o["apiVersion"].startswith("cert-manager.io/"):
            cert_manager.append(o)
            continue
        try:
            kubernetes_validate.validate(o, KUBERNETES, strict=True)
            print(f"ok   {where} (Kubernetes {KUBERNETES}, strict)")
        except Exception as e:  # ValidationError, SchemaNotFoundError: both are failures here
            print(f"FAIL {where}: {getattr(e, 'message', e)}")
            failed += 1
    check = subprocess.run(
        ["node", str(ROOT / ".ci" / "validate-crd-objects.mjs")],
        input=json.dumps(cert_manager), capture_output=True, text=True,
    )
    print(check.stdout, end="")
    print(check.stderr, end="", file=sys.stderr)
    failed += check.returncode != 0
    if len(cert_manager) != 4:
        print(f"FAIL expected the 4 cert-manager objects of deploy/base, found {len(cert_manager)}")
        failed += 1

    binary = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "debug" / "admission-proxy"
    arguments = [str(binary), "registration", "--config", str(ROOT / "config"),
                 "--service", "webhooks/admission-proxy", "--inject-ca-from",
                 "webhooks/admission-proxy"]
    registration = subprocess.run(arguments, check=True, capture_output=True, text=True).stdout
    committed = (OVERLAY / "registration.yaml").read_text()
    if registration != committed:
        print("FAIL deploy/overlays/example/registration.yaml is not what `admission-proxy "
              "registration` prints for config/: regenerate it (docs/operating.md, Deploying)")
        failed += 1
    else:
        print("ok   deploy/overlays/example/registration.yaml matches `admission-proxy registration`")

    # `registration --chain`: one configuration per legacy configuration of config/ (two
    # validating, two mutating), each with one webhook on its chain route.
    chains = [o for o in yaml.safe_load_all(subprocess.run(
        arguments + ["--chain"], check=True, capture_output=True, text=True,
    ).stdout) if o]
    for o in chains:
        where = f"{o['kind']} {o['metadata']['name']} (registration --chain)"
        try:
            kubernetes_validate.validate(o, KUBERNETES, strict=True)
            paths = [w["clientConfig"]["service"]["path"] for w in o["webhooks"]]
            if len(paths) != 1 or not paths[0].startswith("/configurations/"):
                raise ValueError(f"expected one webhook on a chain route, found {paths}")
            print(f"ok   {where} (Kubernetes {KUBERNETES}, strict)")
        except Exception as e:  # as above, plus the shape check
            print(f"FAIL {where}: {getattr(e, 'message', e)}")
            failed += 1
    if len(chains) != 4:
        print(f"FAIL expected 4 configurations from `registration --chain`, found {len(chains)}")
        failed += 1
    print(f"manifests: {len(objects) + 1 + len(chains) - failed} checks ok, {failed} failing")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
