#!/usr/bin/env bash
# Copies what the tests run out of the build folder (SwiftPM's scratch path, the first argument, by default .build)
# into .build/under-test: the test bundle, `iap-worker`, `iap-dev` and the resource bundles beside them. The Makefile
# points the tests at the copies (IAP_TEST_BUNDLE, IAP_WORKER_BIN, IAP_DEV_BIN), so that a build in the folder while
# they run — the previous version's, which `make test` builds beside the tests when it is not cached — cannot change
# what they test, and a build folder shared between clones (CI's, in the build cache) is only read once.
set -euo pipefail
cd "$(dirname "$0")/.."
scratch=${1:-.build}
built="$scratch/debug"
for product in iap-workerPackageTests.xctest iap-worker iap-dev; do
    [[ -x "$built/$product" ]] || { echo "stage-tests.sh: no $built/$product: build first (swift build --build-tests)" >&2; exit 1; }
done
rm -rf .build/under-test.new
mkdir -p .build/under-test.new
cp --reflink=auto "$built/iap-workerPackageTests.xctest" "$built/iap-worker" "$built/iap-dev" .build/under-test.new/
# Resource bundles (a dependency's) are looked up beside the executable first.
for resources in "$built"/*.resources; do
    [[ -e "$resources" ]] && cp -R "$resources" .build/under-test.new/
done
rm -rf .build/under-test
mv .build/under-test.new .build/under-test
