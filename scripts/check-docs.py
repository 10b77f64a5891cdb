"""Checks docs/: every JSON Schema is a valid 2020-12 schema, and the AsyncAPI document is a 3.0 document whose
$refs all resolve. (The dashboard, alert rules and runbook: scripts/check-monitoring.py.)"""
import json
import pathlib
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

if failures:
    print("\n".join(failures), file=sys.stderr)
    sys.exit(1)
