"""Checks docs/: every JSON Schema is a valid 2020-12 schema, the AsyncAPI document is a 3.0 document whose
$refs all resolve, and the Grafana dashboard queries only metrics the worker exports."""
import json
import pathlib
import re
import sys

import jsonschema
import yaml

root = pathlib.Path(__file__).resolve().parent.parent
failures = []

for path in sorted((root / "docs" / "schemas").glob("*.schema.json")):
    schema = json.loads(path.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    print(f"ok  {path.relative_to(root)}")

asyncapi_path = root / "docs" / "asyncapi.yaml"
asyncapi = yaml.safe_load(asyncapi_path.read_text())
if asyncapi.get("asyncapi") != "3.0.0":
    failures.append("docs/asyncapi.yaml: asyncapi must be 3.0.0")
for key in ("info", "channels", "operations", "components"):
    if key not in asyncapi:
        failures.append(f"docs/asyncapi.yaml: no {key}")


def refs(node):
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield value
            else:
                yield from refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from refs(value)


for ref in refs(asyncapi):
    if ref.startswith("#/"):
        node = asyncapi
        for part in ref[2:].split("/"):
            node = node.get(part) if isinstance(node, dict) else None
        if node is None:
            failures.append(f"docs/asyncapi.yaml: {ref} does not resolve")
    elif not (asyncapi_path.parent / ref).exists():
        failures.append(f"docs/asyncapi.yaml: {ref} does not exist")
for name, operation in asyncapi.get("operations", {}).items():
    if operation.get("action") not in ("send", "receive"):
        failures.append(f"docs/asyncapi.yaml: operation {name} has no send/receive action")
print("ok  docs/asyncapi.yaml")

metrics = set(re.findall(r'public static let \w+ = "(iap_\w+)"', (root / "Sources/Worker/Observability/WorkerMetrics.swift").read_text()))
for path in sorted((root / "deploy" / "grafana").glob("*.json")):
    dashboard = json.loads(path.read_text())
    queried = set()
    for panel in dashboard.get("panels", []):
        for target in panel.get("targets", []):
            queried |= {m for m in re.findall(r"\b(iap_\w+?)(?:_bucket|_sum|_count)?\b", target.get("expr", ""))}
    unknown = {m for m in queried if m not in metrics and re.sub(r"_(bucket|sum|count)$", "", m) not in metrics}
    if unknown:
        failures.append(f"{path.relative_to(root)}: unknown metrics {sorted(unknown)}")
    print(f"ok  {path.relative_to(root)} ({len(queried)} metrics)")

if failures:
    print("\n".join(failures), file=sys.stderr)
    sys.exit(1)
