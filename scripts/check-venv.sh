#!/usr/bin/env bash
# The Python environment of the project's checks: creates .build/check-venv when missing, installs the pinned
# packages below when they changed (or were never installed), and prints the venv's python on stdout (anything
# else goes to stderr). Safe to run again and from several processes at once (a lock serialises them).
#   scripts/check-deploy.sh            — kubernetes-validate, the compose, monitoring and docs checks
#   scripts/cloudevents-venv.sh        — the same venv for the CloudEvents interop test (cloudevents, jsonschema)
#   scripts/console-browser-check.py   — the console's browser test (selenium, driving Debian's chromium)
set -euo pipefail
cd "$(dirname "$0")/.."

requirements="cloudevents==2.2.0
jsonschema==4.26.0
rfc3339-validator==0.1.4
kubernetes-validate==1.37.0
PyYAML==6.0.3
selenium==4.38.0"

venv=.build/check-venv
# shellcheck source=scripts/venv-lib.sh
. scripts/venv-lib.sh
ensure_venv "$venv" "$requirements" true || {
    echo "check-venv: could not install $(echo "$requirements" | tr '\n' ' ')into $venv" >&2
    exit 1
}
echo "$PWD/$venv/bin/python"
