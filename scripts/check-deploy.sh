#!/usr/bin/env bash
# Validates the deployment and interface documents: the Kubernetes manifests (kubernetes-validate, PyPI),
# the compose file (docker-compose config, Debian), the AsyncAPI document and the JSON Schemas (jsonschema,
# PyPI: each schema is a valid 2020-12 schema, every $ref of the AsyncAPI document resolves), and the
# Grafana dashboard (JSON, and every metric it queries exists in DESIGN's list).
set -euo pipefail
cd "$(dirname "$0")/.."

sudo_if_needed() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
if ! command -v docker-compose > /dev/null; then
    sudo_if_needed apt-get update -qq
    sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-compose > /dev/null
fi
venv=.build/check-venv
if [ ! -x "$venv/bin/kubernetes-validate" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet kubernetes-validate jsonschema pyyaml
fi

echo "== Kubernetes manifests"
for file in deploy/kubernetes/*.yaml; do
    case "$(basename "$file")" in
        kustomization.yaml) "$venv/bin/python" -c 'import os, sys, yaml; d = yaml.safe_load(open(sys.argv[1])); missing = [r for r in d["resources"] if not os.path.exists(os.path.join(os.path.dirname(sys.argv[1]), r))]; sys.exit("kustomization lists missing files: %s" % missing if missing else print("ok  " + sys.argv[1]))' "$file" ;;
        # kubernetes-validate has no schema for KEDA's CRD: check that it targets the Deployment instead.
        keda-scaledobject.yaml) "$venv/bin/python" -c 'import sys, yaml; d = yaml.safe_load(open(sys.argv[1])); dep = yaml.safe_load(open(sys.argv[2])); assert d["kind"] == "ScaledObject" and d["spec"]["scaleTargetRef"]["name"] == dep["metadata"]["name"] and d["spec"]["triggers"][0]["type"] == "kafka", "ScaledObject does not target the Deployment"; print("ok  " + sys.argv[1])' "$file" deploy/kubernetes/deployment.yaml ;;
        *) "$venv/bin/kubernetes-validate" --strict "$file" ;;
    esac
done

echo "== compose file"
docker-compose -f deploy/compose.yaml config --quiet

echo "== AsyncAPI and JSON Schemas"
"$venv/bin/python" scripts/check-docs.py

echo "deployment and interface documents are valid"
