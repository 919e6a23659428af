#!/usr/bin/env python3
"""Checks deploy/monitoring against the proxy and the real tools:

- `promtool check rules` on rules.yaml and `promtool test rules` on rules-test.yaml; every
  alert (and each of its severities) fires in a test, and every alert is asserted silent in
  one;
- every alert has a severity, a summary, a description and a runbook_url whose anchor is a
  heading of docs/alerts.md (GitHub's anchors);
- prometheusrule.yaml is what `--write` generates from rules.yaml (so its spec.groups are
  rules.yaml's groups);
- dashboard.json loads, its panels are laid out without overlap, every query uses the
  `datasource` variable, and every PromQL query parses (`promtool check rules` on the queries
  as recording rules, Grafana's variables replaced); every metric an alert fires on is in a
  dashboard query;
- every metric name in the rules' and the dashboard's queries is one the proxy exports: the
  families of src/metrics.rs, histograms as `_bucket`/`_sum`/`_count` (the exporter renders
  a histogram where buckets are set, else a summary); every label name used is a scrape label
  or a string of src/metrics.rs, and every label value matched is a string of src/metrics.rs
  or src/decision.rs. A metric or label renamed in Rust fails here;
- `kubectl kustomize deploy/monitoring` renders; the ConfigMap is valid Kubernetes 1.32
  (kubernetes-validate, strict), the PodMonitor and PrometheusRule valid against the
  Prometheus Operator's CRD schemas (validate-crd-objects.mjs); the rendered rules
  and dashboard are the files'.

`--write` regenerates prometheusrule.yaml from rules.yaml. `--metrics-rs FILE` reads the
exported families from FILE instead of src/metrics.rs. Exit 1 on any problem."""

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
MONITORING = ROOT / "deploy" / "monitoring"
KUBERNETES = "1.32.0"

# Labels Prometheus (or a PodMonitor) adds to every scraped series, and the exposition's own.
SCRAPE_LABELS = {"job", "instance", "namespace", "pod", "container", "endpoint", "service",
                 "le", "quantile", "__name__"}
SEVERITIES = {"warning", "critical"}
# Grafana's variables in queries, replaced so that promtool can parse them.
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}
PROMETHEUSRULE_HEADER = """\
# GENERATED from rules.yaml by `python3 .ci/check-monitoring.py --write`: edit rules.yaml,
# then regenerate (CI fails when the two differ). The Prometheus Operator's form of the same
# rules; add the labels your Prometheus's ruleSelector asks for (kube-prometheus-stack:
# `release: <its release name>`) in the kustomization that includes it.
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: admission-proxy
spec:
"""


class Checks:
    def __init__(self):
        self.ok = 0
        self.failed = 0

    def check(self, passed: bool, what: str, why: str = "") -> bool:
        if passed:
            print(f"ok   {what}")
            self.ok += 1
        else:
            print(f"FAIL {what}{': ' + why if why else ''}")
            self.failed += 1
        return passed


def prometheusrule_text(rules_text: str) -> str:
    """prometheusrule.yaml for rules.yaml's text: its groups, indented under spec."""
    lines = rules_text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("groups:"))
    body = "".join(f"  {line}\n" if line else "\n" for line in lines[start:])
    return PROMETHEUSRULE_HEADER + body


def exported(metrics_rs: str) -> tuple[set, set, set]:
    """The series names the proxy exports, every string literal of the file, and the
    admission_proxy_ names it uses that FAMILIES does not describe."""
    literals = set(re.findall(r'"([^"\\\n]*)"', metrics_rs))
    families = re.findall(r'\(\s*"(admission_proxy_[a-z0-9_]+)",\s*Kind::(\w+)', metrics_rs)
    suffixes = re.findall(r'set_buckets_for_metric\(\s*Matcher::Suffix\("([^"]+)"', metrics_rs)
    names = set()
    for name, kind in families:
        if kind != "Histogram":
            names.add(name)
        elif any(name.endswith(s) for s in suffixes):
            names |= {name + "_bucket", name + "_sum", name + "_count"}
        else:  # a summary: quantile series under the name itself
            names |= {name, name + "_sum", name + "_count"}
    # A literal used in a macro call but missing from FAMILIES would be exported undescribed.
    undescribed = {n for n in re.findall(r'"(admission_proxy_[a-z0-9_]+)"', metrics_rs)
                   if n not in {f for f, _ in families}}
    return names, literals, undescribed


def expressions_of_dashboard(dashboard: dict) -> list[tuple[str, str, bool]]:
    """(where, expression, is PromQL) for every panel query and templating query."""
    found = []

    def walk(panels):
        for p in panels:
            for t in p.get("targets", []):
                if "expr" in t:
                    found.append((f"panel {p['id']} {p.get('title')!r} {t.get('refId')}",
                                  t["expr"], True))
            walk(p.get("panels", []))

    walk(dashboard.get("panels", []))
    for v in dashboard.get("templating", {}).get("list", []):
        if v.get("type") != "query":
            continue
        query = v.get("query")
        if isinstance(query, dict):
            query = query.get("query", "")
        for q in {query, v.get("definition", "")} - {"", None}:
            found.append((f"variable {v['name']}", q, not q.startswith("label_values(")))
    return found


def name_problems(expr: str, names: set, literals: set, decisions: set,
                  recorded: set) -> list[str]:
    """What is wrong with the metric names, label names and matched label values of one
    expression."""
    tokens = set(re.findall(r"\badmission_proxy[a-zA-Z0-9_:]*", expr))
    unknown = sorted(t for t in tokens if t not in names and t not in recorded)
    label_names = set()
    for clause in re.findall(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)",
                             expr):
        label_names |= {label.strip() for label in clause.split(",") if label.strip()}
    values = []
    for name, selector in re.findall(r"\b(admission_proxy_[a-zA-Z0-9_]*)\s*\{([^}]*)\}", expr):
        for label, op, value in re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"',
                                           selector):
            label_names.add(label)
            if "$" in value:
                continue
            for v in (value.split("|") if "~" in op else [value]):
                if re.fullmatch(r"[A-Za-z0-9_.:-]+", v):
                    values.append((label, v))
    m = re.match(r"label_values\(\s*(?:[^,]*,)?\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)", expr)
    if m:
        label_names.add(m.group(1))
    bad_labels = sorted(label for label in label_names
                        if label not in SCRAPE_LABELS and label not in literals)
    bad_values = sorted({f'{label}="{v}"' for label, v in values
                         if v not in literals and v not in decisions})
    problems = []
    if unknown:
        problems.append(f"metrics not exported by src/metrics.rs: {', '.join(unknown)}")
    if bad_labels:
        problems.append(f"label names not in src/metrics.rs: {', '.join(bad_labels)}")
    if bad_values:
        problems.append(f"label values not in src/: {', '.join(bad_values)}")
    if not tokens and "up{" not in expr:
        problems.append("no admission_proxy_ metric")
    return problems


def check_names(checks: Checks, what: str, expressions: list[tuple[str, str]], *known):
    """One line for the expressions of `what` whose names are all the proxy's, one FAIL line
    for each that is not."""
    bad = 0
    for where, expr in expressions:
        problems = name_problems(expr, *known)
        if problems:
            checks.check(False, f"{what} {where}", "; ".join(problems))
            bad += 1
    if not bad:
        checks.check(True, f"{what}: the {len(expressions)} queries use only metrics, labels "
                     "and values the proxy exports")


def anchors(markdown: str) -> set:
    """GitHub's heading anchors: lowercase, punctuation dropped, spaces to '-', repeats -1, -2."""
    seen = {}
    result = set()
    in_code = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code:
            continue
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        anchor = re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-")
        n = seen.get(anchor, 0)
        seen[anchor] = n + 1
        result.add(anchor if n == 0 else f"{anchor}-{n}")
    return result


def overlaps(a: dict, b: dict) -> bool:
    return (a["x"] < b["x"] + b["w"] and b["x"] < a["x"] + a["w"]
            and a["y"] < b["y"] + b["h"] and b["y"] < a["y"] + a["h"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true",
                        help="regenerate deploy/monitoring/prometheusrule.yaml from rules.yaml")
    parser.add_argument("--metrics-rs", type=Path, default=ROOT / "src" / "metrics.rs",
                        help="the Rust source the exported metrics are read from")
    args = parser.parse_args()

    rules_text = (MONITORING / "rules.yaml").read_text()
    if args.write:
        (MONITORING / "prometheusrule.yaml").write_text(prometheusrule_text(rules_text))
        print("wrote deploy/monitoring/prometheusrule.yaml")
        return 0

    checks = Checks()
    promtool = shutil.which("promtool")
    if not promtool:
        print("FAIL promtool not found: `bash .ci/setup deploy` installs it (Debian's prometheus)")
        return 1

    # The rules, by promtool.
    for command in (["check", "rules", "rules.yaml"], ["test", "rules", "rules-test.yaml"]):
        run = subprocess.run([promtool, *command], cwd=MONITORING, capture_output=True,
                             text=True)
        checks.check(run.returncode == 0, f"promtool {' '.join(command)}",
                     (run.stdout + run.stderr).strip())

    rules = yaml.safe_load(rules_text)
    tests = yaml.safe_load((MONITORING / "rules-test.yaml").read_text())
    all_rules = [r for g in rules["groups"] for r in g["rules"]]
    alerts = [r for r in all_rules if "alert" in r]
    recorded = {r["record"] for r in all_rules if "record" in r}
    rule_tests = [t for test in tests["tests"] for t in test.get("alert_rule_test", [])]
    readme = (ROOT / "docs" / "alerts.md").read_text()
    readme_anchors = anchors(readme)
    source = re.search(r'org\.opencontainers\.image\.source="([^"]+)"',
                       (ROOT / "deploy" / "Containerfile").read_text()).group(1)
    runbook_base = f"{source}/blob/main/docs/alerts.md#"

    # Every alert: labels, annotations, runbook, tests both ways.
    for alert in alerts:
        name = alert["alert"]
        severity = alert.get("labels", {}).get("severity")
        annotations = alert.get("annotations", {})
        url = annotations.get("runbook_url", "")
        problems = []
        if severity not in SEVERITIES:
            problems.append(f"severity {severity!r} is not one of {sorted(SEVERITIES)}")
        for key in ("summary", "description", "runbook_url"):
            if not annotations.get(key):
                problems.append(f"no {key} annotation")
        if not url.startswith(runbook_base):
            problems.append(f"runbook_url {url!r} does not start with {runbook_base}")
        elif url[len(runbook_base):] not in readme_anchors:
            problems.append(f"docs/alerts.md has no heading for #{url[len(runbook_base):]}")
        fired = [e for t in rule_tests if t["alertname"] == name for e in t.get("exp_alerts") or []]
        if not any(e.get("exp_labels", {}).get("severity") == severity for e in fired):
            problems.append(f"no test fires it with severity {severity}")
        if not any(t["alertname"] == name and not t.get("exp_alerts") for t in rule_tests):
            problems.append("no test asserts it silent (exp_alerts: [])")
        checks.check(not problems, f"alert {name} ({severity})", "; ".join(problems))

    # The proxy's metric names, labels and values.
    metrics_rs = args.metrics_rs.read_text()
    names, literals, undescribed = exported(metrics_rs)
    decisions = set(re.findall(r'=>\s*"([a-z-]+)"', (ROOT / "src" / "decision.rs").read_text()))
    checks.check(bool(names) and not undescribed,
                 f"{len(names)} exported series names read from {args.metrics_rs.name}",
                 f"families used but not described in FAMILIES: {sorted(undescribed)}"
                 if undescribed else "no families found")
    check_names(checks, "rules.yaml",
                [(rule.get("alert") or rule.get("record"), rule["expr"]) for rule in all_rules],
                names, literals, decisions, recorded)

    # The dashboard.
    dashboard = json.loads((MONITORING / "dashboard.json").read_text())
    variables = {v["name"]: v for v in dashboard.get("templating", {}).get("list", [])}
    checks.check(variables.get("datasource", {}).get("type") == "datasource"
                 and variables["datasource"].get("query") == "prometheus"
                 and "label_values(" in json.dumps(variables.get("webhook", {}))
                 and isinstance(dashboard.get("schemaVersion"), int),
                 "dashboard.json: schemaVersion, `datasource` and `webhook` variables")
    panels = []

    def flatten(ps):
        for p in ps:
            panels.append(p)
            flatten(p.get("panels", []))

    flatten(dashboard.get("panels", []))
    ids = [p["id"] for p in panels]
    layout = []
    for i, a in enumerate(panels):
        g = a["gridPos"]
        if g["x"] < 0 or g["x"] + g["w"] > 24:
            layout.append(f"panel {a['id']} is outside the 24 columns")
        layout += [f"panels {a['id']} and {b['id']} overlap"
                   for b in panels[i + 1:] if overlaps(g, b["gridPos"])]
        if a["type"] != "row":
            uses = [a.get("datasource")] + [t.get("datasource") for t in a.get("targets", [])]
            if any(d != {"type": "prometheus", "uid": "${datasource}"} for d in uses):
                layout.append(f"panel {a['id']} does not query ${{datasource}}")
            if not a.get("targets"):
                layout.append(f"panel {a['id']} has no query")
    checks.check(len(ids) == len(set(ids)) and not layout,
                 f"dashboard.json: {len(panels)} panels, unique ids, laid out, on ${{datasource}}",
                 "; ".join(layout) or "duplicate panel ids")
    queries = expressions_of_dashboard(dashboard)
    # Whoever an alert pages finds what it fired on, across replicas and over time.
    shown = {m for _, expr, _ in queries for m in re.findall(r"\badmission_proxy_\w+", expr)}
    unshown = sorted({f"{alert['alert']}: {m}" for alert in alerts
                      for m in re.findall(r"\badmission_proxy_\w+", alert["expr"])
                      if m not in shown})
    checks.check(not unshown, "dashboard.json shows every metric an alert fires on",
                 f"not in any panel: {'; '.join(unshown)}")
    promql = []
    check_names(checks, "dashboard.json", [(where, expr) for where, expr, _ in queries],
                names, literals, decisions, set())
    for where, expr, is_promql in queries:
        if is_promql:
            for variable, value in GRAFANA_VARIABLES.items():
                expr = expr.replace(variable, value)
            promql.append(re.sub(r"\$\{?\w+\}?", ".*", expr))
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        yaml.safe_dump({"groups": [{"name": "dashboard", "rules": [
            {"record": f"dashboard:query_{i}", "expr": e} for i, e in enumerate(promql)]}]}, f)
        f.flush()
        run = subprocess.run([promtool, "check", "rules", f.name], capture_output=True, text=True)
        checks.check(run.returncode == 0, f"dashboard.json: {len(promql)} PromQL queries parse",
                     (run.stdout + run.stderr).strip())

    # The PrometheusRule and the rendered manifests.
    committed = (MONITORING / "prometheusrule.yaml").read_text()
    checks.check(committed == prometheusrule_text(rules_text)
                 and yaml.safe_load(committed)["spec"]["groups"] == rules["groups"],
                 "prometheusrule.yaml is generated from rules.yaml",
                 "regenerate it: python3 .ci/check-monitoring.py --write")
    rendered = subprocess.run(["kubectl", "kustomize", str(MONITORING)], capture_output=True,
                              text=True)
    if not checks.check(rendered.returncode == 0, "kubectl kustomize deploy/monitoring",
                        rendered.stderr.strip()):
        return finish(checks)
    objects = {o["kind"]: o for o in yaml.safe_load_all(rendered.stdout) if o}
    checks.check(sorted(objects) == ["ConfigMap", "PodMonitor", "PrometheusRule"],
                 "deploy/monitoring renders a ConfigMap, a PodMonitor and a PrometheusRule",
                 f"found {sorted(objects)}")
    configmap = objects.get("ConfigMap", {})
    try:
        import kubernetes_validate
        kubernetes_validate.validate(configmap, KUBERNETES, strict=True)
        checks.check(True, f"ConfigMap {configmap['metadata']['name']} "
                     f"(Kubernetes {KUBERNETES}, strict)")
    except Exception as e:  # ValidationError, SchemaNotFoundError, ImportError: all failures
        checks.check(False, "ConfigMap (Kubernetes, strict)", getattr(e, "message", str(e)))
    checks.check(configmap.get("data", {}).get("dashboard.json")
                 == (MONITORING / "dashboard.json").read_text()
                 and configmap["metadata"].get("labels", {}).get("grafana_dashboard") == "1",
                 "the ConfigMap holds dashboard.json, labelled grafana_dashboard")
    checks.check(objects.get("PrometheusRule", {}).get("spec", {}).get("groups")
                 == rules["groups"], "the rendered PrometheusRule's groups are rules.yaml's")
    operator = [o for o in objects.values() if o["apiVersion"].startswith("monitoring.coreos.com/")]
    run = subprocess.run(["node", str(ROOT / ".ci" / "validate-crd-objects.mjs")],
                         input=json.dumps(operator), capture_output=True, text=True)
    for line in run.stdout.splitlines():
        checks.check(line.startswith("ok "), line[5:] if len(line) > 5 else line)
    if run.returncode != 0 and not run.stdout:
        checks.check(False, "validate-crd-objects.mjs", run.stderr.strip())
    return finish(checks)


def finish(checks: Checks) -> int:
    print(f"monitoring: {checks.ok} checks ok, {checks.failed} failing")
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
