#!/usr/bin/env bash
# Builds `iap-worker` as it was at the version before the newest ledger migration, for the mixed-version test
# (Tests/EndToEndTests/MixedVersionProcessTests.swift: instances of both versions on one PostgreSQL ledger, rolled
# one by one under load). Prints the executable's path; a build of the same revision is reused.
#
# IAP_WORKER_PREVIOUS_REV names the revision (default below: the last commit whose schema ends at 006_refunds, before
# 007_refund_reports). When a migration is added, set the default to the last commit before it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
swift=${SWIFT:-swift}
rev=${IAP_WORKER_PREVIOUS_REV:-46b1d498d9d7659a3953152fe9751ee625f2df1c}
out="$root/.build-previous"
commit=$(git -C "$root" rev-parse --verify "$rev^{commit}")
if [[ -x "$out/bin/iap-worker" && "$(cat "$out/bin/commit" 2>/dev/null)" == "$commit" ]]; then
    echo "$out/bin/iap-worker"
    exit 0
fi
rm -rf "$out/src" "$out/bin"
mkdir -p "$out/src" "$out/bin"
git -C "$root" archive "$commit" | tar -x -C "$out/src"
# The dependency versions this checkout resolved, so both builds use the same ones.
if [[ -f "$root/Package.resolved" ]]; then cp "$root/Package.resolved" "$out/src/Package.resolved"; fi
echo "building iap-worker at ${commit:0:12} (the version before the newest migration) in $out…" >&2
"$swift" build --package-path "$out/src" --scratch-path "$out/build" --product iap-worker >&2
cp "$out/build/debug/iap-worker" "$out/bin/iap-worker"
echo "$commit" > "$out/bin/commit"
rm -rf "$out/src"
echo "$out/bin/iap-worker"
