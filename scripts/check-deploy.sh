#!/usr/bin/env bash
# Validates the deployment, monitoring and interface documents (the first step of `make test`):
#   - Kubernetes: deploy/kubernetes/ rendered as `kubectl apply -k` would apply it (scripts/check-kubernetes.py:
#     no Secret applied, no replicas beside KEDA, no static membership, a generated ConfigMap, …), every object
#     validated with kubernetes-validate --strict (PyPI);
#   - compose: `docker-compose config` (Debian), every address a service calls is one that service listens on, and
#     every service built from deploy/Dockerfile runs a command of its target's executable (scripts/check-compose.py);
#     the Prometheus configuration (promtool check config);
#   - alerts: the PrometheusRule's rules (promtool check rules, Debian's prometheus package) and their unit tests
#     (promtool test rules), the dashboard and rules against deploy/prometheus/metrics.txt, a runbook section per
#     alert (scripts/check-monitoring.py);
#   - systemd: systemd-analyze verify, and systemd-analyze security --offline under an exposure threshold;
#   - the AsyncAPI document and JSON Schemas (scripts/check-docs.py);
#   - the CloudEvents interop reader (scripts/cloudevents-interop.py, the official SDK) on its fixtures;
#   - the image's build: deploy/Dockerfile passes the Makefile's RELEASE_FLAGS (scripts/check-release-flags.py).
# The checks that guard against a known past mistake also run once on a broken input and must refuse it.
# Installs what it needs when missing (apt as root or through sudo; a venv under .build/), quietly.
set -euo pipefail
cd "$(dirname "$0")/.."

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

sudo_if_needed() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
need=()
command -v docker-compose > /dev/null || need+=(docker-compose)
command -v promtool > /dev/null || need+=(prometheus)
command -v systemd-analyze > /dev/null || need+=(systemd)
if [ ${#need[@]} -gt 0 ]; then
    echo "check-deploy: installing ${need[*]}" >&2
    { sudo_if_needed apt-get update -qq &&
      sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
    } > "$tmp/apt.log" 2>&1 || { cat "$tmp/apt.log" >&2; exit 1; }
fi
python=$(scripts/check-venv.sh)
bin=$(dirname "$python")

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
"$python" scripts/check-kubernetes.py deploy/kubernetes "$tmp/kubernetes"
# secret.example.yaml is not applied, but it must still be a valid Secret to copy from.
"$bin/kubernetes-validate" --strict --quiet "$tmp/kubernetes"/*.yaml deploy/kubernetes/secret.example.yaml
echo "ok  kubernetes-validate --strict: $(ls "$tmp/kubernetes" | wc -l) rendered objects and secret.example.yaml"
if command -v kubectl > /dev/null && kubectl kustomize deploy/kubernetes > "$tmp/kustomize.yaml" 2> /dev/null; then
    # Where kubectl is installed, kustomize's own rendering is validated too.
    "$bin/kubernetes-validate" --strict --quiet --no-warn "$tmp/kustomize.yaml"
    echo "ok  kubectl kustomize deploy/kubernetes | kubernetes-validate --strict"
fi
cp -r deploy/kubernetes "$tmp/broken-kubernetes"
"$python" - "$tmp/broken-kubernetes" <<'EOF'
import pathlib, sys, yaml
k = pathlib.Path(sys.argv[1])
kustomization = yaml.safe_load((k / "kustomization.yaml").read_text())
kustomization["resources"].append("secret.example.yaml")
(k / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
deployment = yaml.safe_load((k / "deployment.yaml").read_text())
deployment["spec"]["replicas"] = 3
(k / "deployment.yaml").write_text(yaml.safe_dump(deployment))
EOF
refuses "a kustomization applying the example Secret" "applies Secret iap-worker" \
    "$python" scripts/check-kubernetes.py "$tmp/broken-kubernetes" "$tmp/broken-out"
refuses "a Deployment with replicas beside KEDA" "sets replicas beside a ScaledObject" \
    "$python" scripts/check-kubernetes.py "$tmp/broken-kubernetes" "$tmp/broken-out"

echo "== the image's build"
python3 scripts/check-release-flags.py
sed -e 's/-Xswiftc -use-ld=lld //' deploy/Dockerfile > "$tmp/Dockerfile.other-flags"
refuses "an image built with other flags than make release" "RELEASE_FLAGS differ from the Makefile's" \
    python3 scripts/check-release-flags.py Makefile "$tmp/Dockerfile.other-flags"
sed -e 's/--product iap-worker --static-swift-stdlib \$RELEASE_FLAGS/--product iap-worker --static-swift-stdlib/' \
    deploy/Dockerfile > "$tmp/Dockerfile.unflagged"
refuses "an image whose worker is built without them" "builds without \$RELEASE_FLAGS" \
    python3 scripts/check-release-flags.py Makefile "$tmp/Dockerfile.unflagged"

echo "== compose file"
docker-compose -f deploy/compose.yaml config --quiet
echo "ok  docker-compose config deploy/compose.yaml"
"$python" scripts/check-compose.py deploy/compose.yaml
refuses "a simulator listening on its container's loopback" "gamebase-sim listens on port 9090 on loopback only" \
    "$python" scripts/check-compose.py scripts/testdata/compose-sim-on-loopback.yaml
refuses "a development tool run from the worker's image" "runs \`iap-worker gamebase-sim\`, which iap-worker does not have" \
    "$python" scripts/check-compose.py scripts/testdata/compose-dev-tool-in-worker-image.yaml
promtool check config deploy/prometheus/prometheus.yml > /dev/null
echo "ok  promtool check config deploy/prometheus/prometheus.yml"

echo "== alert rules, dashboard, runbook"
"$python" scripts/check-monitoring.py "$tmp/rules"
promtool check rules "$tmp/rules/iap-worker.rules.yml" | sed -n 's/^ *SUCCESS: /ok  promtool check rules: /p'
(cd "$tmp/rules" && promtool test rules iap-worker-rules.test.yaml > test.out 2>&1) || {
    cat "$tmp/rules/test.out" >&2
    echo "check-deploy: an alert rule does not behave as deploy/prometheus/iap-worker-rules.test.yaml expects" >&2
    exit 1
}
echo "ok  promtool test rules deploy/prometheus/iap-worker-rules.test.yaml"

echo "== systemd unit"
# verify needs the ExecStart binary to exist; everything else is checked as written. It reports problems
# (unknown keys, bad values, unknown system call groups) as warnings with exit code 0: any output fails.
sed 's#^ExecStart=/usr/local/bin/iap-worker #ExecStart=/bin/true #' deploy/systemd/iap-worker.service > "$tmp/iap-worker.service"
systemd-analyze verify "$tmp/iap-worker.service" > "$tmp/verify.out" 2>&1 || true
if [ -s "$tmp/verify.out" ]; then
    cat "$tmp/verify.out" >&2
    echo "check-deploy: systemd-analyze verify reports problems in deploy/systemd/iap-worker.service" >&2
    exit 1
fi
echo "ok  systemd-analyze verify deploy/systemd/iap-worker.service"
systemd-analyze security --offline=true --threshold=20 deploy/systemd/iap-worker.service > "$tmp/security.out" || {
    cat "$tmp/security.out" >&2
    echo "check-deploy: the unit's exposure rose above 2.0" >&2
    exit 1
}
sed -n 's/^→ Overall exposure level for iap-worker.service: /ok  systemd-analyze security: /p' "$tmp/security.out"

echo "== AsyncAPI and JSON Schemas"
"$python" scripts/check-docs.py

echo "== CloudEvents interop (the official Python SDK)"
"$python" scripts/cloudevents-interop.py scripts/testdata/cloudevents-records.json | sed 's/^/ok  /'
refuses "records with ce_ headers beside a structured body" "Missing required attribute: 'source'" \
    "$python" scripts/cloudevents-interop.py scripts/testdata/cloudevents-records-ce-headers.json

echo "deployment and interface documents are valid"
