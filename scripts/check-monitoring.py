"""Checks the monitoring documents against each other and prepares the alert rules for promtool.

    check-monitoring.py OUT

- deploy/prometheus/metrics.txt lists the metrics the worker exposes; every iap_* name declared in
  Sources/App/Observability/WorkerMetrics.swift must be in it.
- The Grafana dashboards (deploy/grafana/*.json) and the alert rules query only listed metrics, with histogram
  suffixes only on histograms and label matchers only on their labels (or the scrape's own labels).
- The stat panels of the 0/1 failure flags (iap_stopped, iap_circuit_open, iap_ledger_unavailable) show red at 1
  and green at 0 (value mappings first, then thresholds, as Grafana colours them).
- deploy/prometheus/iap-worker-rules.yaml is a PrometheusRule; every alert has a severity, a summary, a
  description and a runbook_url whose anchor is a heading of docs/runbook.md; every alert is fired at least
  once by iap-worker-rules.test.yaml; docs/runbook.md has a section per dead-letter reason and for
  reconciliation.

Writes the PrometheusRule's spec (a plain rule file) as OUT/iap-worker.rules.yml and copies the unit tests beside
it, for `promtool check rules` and `promtool test rules` (scripts/check-deploy.sh).
"""
import json
import pathlib
import re
import shutil
import sys

import yaml

root = pathlib.Path(__file__).resolve().parent.parent
out = pathlib.Path(sys.argv[1])
failures = []

# --- the metric list ---------------------------------------------------------------------------------------------
metrics = {}
for line in (root / "deploy/prometheus/metrics.txt").read_text().splitlines():
    if line.strip() and not line.startswith("#"):
        name, kind, labels = (line.split(None, 2) + ["-"])[:3]
        names = (label.strip() for label in re.sub(r"\(.*?\)", "", labels).split(","))
        metrics[name] = (kind, {label for label in names if label not in ("", "-")})
declared = set(re.findall(r'"(iap_\w+)"', (root / "Sources/App/Observability/WorkerMetrics.swift").read_text()))
for name in sorted(declared - set(metrics)):
    failures.append(f"WorkerMetrics.swift declares {name}, which deploy/prometheus/metrics.txt does not list")

# Labels every scraped series may carry besides its own: the scrape's, Kubernetes service discovery's, le.
TARGET_LABELS = {"job", "instance", "namespace", "pod", "container", "service", "endpoint", "node"}
SUFFIXES = ("_bucket", "_sum", "_count")


def check_expr(where, expr):
    used = set()
    for match in re.finditer(r"\b(iap_\w+)(\{[^}]*\})?", expr):
        name, selector = match.group(1), match.group(2) or ""
        base = name
        if name not in metrics:
            base = next((name[: -len(s)] for s in SUFFIXES if name.endswith(s) and name[: -len(s)] in metrics), None)
            if base is None or metrics[base][0] != "histogram":
                failures.append(f"{where}: unknown metric {name}")
                continue
        used.add(base)
        allowed = metrics[base][1] | TARGET_LABELS | ({"le"} if name.endswith("_bucket") else set())
        for label in re.findall(r"(\w+)\s*(?:=~|!~|!=|=)", selector):
            if label not in allowed:
                failures.append(f"{where}: {name} has no label {label}")
    return used


# --- dashboards ----------------------------------------------------------------------------------------------------
FLAGS = ("iap_stopped", "iap_circuit_open", "iap_ledger_unavailable")


def colour(defaults, value):
    """The colour Grafana gives a stat's value: a matching value mapping's, else the last threshold step <= value."""
    for mapping in defaults.get("mappings", []):
        if mapping.get("type") == "value":
            result = mapping.get("options", {}).get(str(value))
            if result and result.get("color"):
                return result["color"]
    steps = defaults.get("thresholds", {}).get("steps", [])
    chosen = None
    for step in steps:
        if step.get("value") is None or value >= step["value"]:
            chosen = step.get("color")
    return chosen or "none"


for path in sorted((root / "deploy/grafana").glob("*.json")):
    before = len(failures)
    dashboard = json.loads(path.read_text())
    queried, flag_panels = set(), set()
    for panel in dashboard.get("panels", []):
        for target in panel.get("targets", []):
            used = check_expr(f"{path.name} panel {panel.get('title')!r}", target.get("expr", ""))
            queried |= used
            if panel.get("type") == "stat":
                for flag in used & set(FLAGS):
                    flag_panels.add(flag)
                    defaults = panel.get("fieldConfig", {}).get("defaults", {})
                    on, off = colour(defaults, 1), colour(defaults, 0)
                    if "red" not in on or "green" not in off:
                        failures.append(f"{path.name} panel {panel.get('title')!r}: {flag} shows {on} at 1 "
                                        f"and {off} at 0 (want red and green)")
    for flag in FLAGS:
        if flag not in flag_panels:
            failures.append(f"{path.name}: no stat panel shows {flag}")
    if len(failures) == before:
        print(f"ok  {path.relative_to(root)} ({len(queried)} metrics)")

# --- alert rules ---------------------------------------------------------------------------------------------------
def slug(heading):
    """GitHub's anchor for a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


runbook_text = (root / "docs/runbook.md").read_text()
anchors = {slug(h) for h in re.findall(r"^#{1,6}\s+(.*?)\s*#*\s*$", runbook_text, re.M)}

before = len(failures)
rules_path = root / "deploy/prometheus/iap-worker-rules.yaml"
rule_object = yaml.safe_load(rules_path.read_text())
if rule_object.get("apiVersion") != "monitoring.coreos.com/v1" or rule_object.get("kind") != "PrometheusRule":
    failures.append(f"{rules_path.name}: not a monitoring.coreos.com/v1 PrometheusRule")
alerts = []
for group in rule_object.get("spec", {}).get("groups", []):
    for rule in group.get("rules", []):
        where = f"{rules_path.name} {rule.get('alert') or rule.get('record')}"
        check_expr(where, rule.get("expr", ""))
        if "alert" not in rule:
            continue
        alerts.append(rule["alert"])
        if rule.get("labels", {}).get("severity") not in ("critical", "warning", "info"):
            failures.append(f"{where}: severity must be critical, warning or info")
        annotations = rule.get("annotations", {})
        for key in ("summary", "description", "runbook_url"):
            if not annotations.get(key, "").strip():
                failures.append(f"{where}: no {key} annotation")
        url = annotations.get("runbook_url", "")
        if not re.search(r"/docs/runbook\.md#", url):
            failures.append(f"{where}: runbook_url {url!r} does not point into docs/runbook.md")
        elif url.split("#", 1)[1] not in anchors:
            failures.append(f"{where}: docs/runbook.md has no section #{url.split('#', 1)[1]}")

tests_path = root / "deploy/prometheus/iap-worker-rules.test.yaml"
fired = set()
for test in yaml.safe_load(tests_path.read_text()).get("tests", []):
    for case in test.get("alert_rule_test", []):
        if case.get("exp_alerts"):
            fired.add(case["alertname"])
for alert in alerts:
    if alert not in fired:
        failures.append(f"{tests_path.name}: no test fires {alert}")
if len(failures) == before:
    print(f"ok  {rules_path.relative_to(root)} ({len(alerts)} alerts, each with a runbook section and a firing test)")

# --- runbook sections beyond the alerts ------------------------------------------------------------------------------
for anchor in ("dead-letter-reasons", "malformed_message", "gamebase_unavailable", "internal_error", "reconciliation"):
    if anchor not in anchors:
        failures.append(f"docs/runbook.md: no section #{anchor}")

out.mkdir(parents=True, exist_ok=True)
(out / "iap-worker.rules.yml").write_text(yaml.safe_dump(rule_object.get("spec", {}), sort_keys=False, width=1000))
shutil.copy(tests_path, out / tests_path.name)

if failures:
    print("\n".join(f"FAIL {failure}" for failure in failures), file=sys.stderr)
    sys.exit(1)
