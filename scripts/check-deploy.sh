#!/usr/bin/env bash
# Validates the deployment and interface documents: the Kubernetes manifests (kubernetes-validate, PyPI),
# the compose file (docker-compose config, Debian; every address a service calls is one that service listens on:
# scripts/check-compose.py), the AsyncAPI document and the JSON Schemas (jsonschema,
# PyPI: each schema is a valid 2020-12 schema, every $ref of the AsyncAPI document resolves), and the
# Grafana dashboard (JSON, and every metric it queries exists in DESIGN's list), and the CloudEvents interop reader
# (scripts/cloudevents-interop.py, the official SDK) on its fixtures, one of which it must refuse.
set -euo pipefail
cd "$(dirname "$0")/.."

sudo_if_needed() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
if ! command -v docker-compose > /dev/null; then
    sudo_if_needed apt-get update -qq
    sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-compose > /dev/null
fi
python=$(scripts/check-venv.sh)
venv=$(dirname "$(dirname "$python")")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# refuses WHAT EXPECTED COMMAND…: COMMAND must fail, and its output must contain EXPECTED.
refuses() {
    local what=$1 expected=$2; shift 2
    if "$@" > "$tmp/refused.out" 2>&1; then
        cat "$tmp/refused.out" >&2
        echo "check-deploy: the check passed $what, which it must refuse" >&2
        return 1
    fi
    if ! grep -qF -- "$expected" "$tmp/refused.out"; then
        cat "$tmp/refused.out" >&2
        echo "check-deploy: refusing $what did not say: $expected" >&2
        return 1
    fi
    echo "ok  refuses $what"
}

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
echo "ok  docker-compose config deploy/compose.yaml"
"$python" scripts/check-compose.py deploy/compose.yaml
refuses "a simulator listening on its container's loopback" "gamebase-sim listens on port 9090 on loopback only" \
    "$python" scripts/check-compose.py scripts/testdata/compose-sim-on-loopback.yaml

echo "== AsyncAPI and JSON Schemas"
"$venv/bin/python" scripts/check-docs.py

echo "== CloudEvents interop (the official Python SDK)"
"$python" scripts/cloudevents-interop.py scripts/testdata/cloudevents-records.json | sed 's/^/ok  /'
refuses "records with ce_ headers beside a structured body" "Missing required attribute: 'source'" \
    "$python" scripts/cloudevents-interop.py scripts/testdata/cloudevents-records-ce-headers.json

echo "deployment and interface documents are valid"
