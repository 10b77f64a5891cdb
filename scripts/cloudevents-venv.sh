#!/usr/bin/env bash
# Prints the path of a python that has the official CloudEvents SDK (cloudevents 2.x) and jsonschema, installing
# them first if needed (idempotent; the checks' venv, .build/check-venv). For the interop test:
#   "$(scripts/cloudevents-venv.sh)" scripts/cloudevents-interop.py records.json
exec "$(dirname "$0")/check-venv.sh"
