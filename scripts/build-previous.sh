#!/usr/bin/env bash
# Builds `iap-worker` as it was at the version before the newest ledger migration, for the mixed-version test
# (Tests/ProcessTests/MixedVersionProcessTests.swift: instances of both versions on one PostgreSQL ledger, rolled one by
# one under load). Prints the executable's path.
#
# The executable is kept outside the clone, in a cache keyed by commit (scripts/cache-dir.sh: IAP_CACHE_DIR, by default
# ~/.cache/iap-worker), so that it is built once per revision on a machine, whichever clone asks: a second CI run, or a
# developer's `make test` after CI's, builds nothing. On a miss it is built in the build folder this version's build
# uses (SWIFT_SCRATCH, by default the clone's .build): the dependencies are then the ones that build compiled already,
# and only the worker's own modules are compiled again. `make test` runs it after this version's build, beside the
# tests (which run copies of this version's executables: scripts/stage-tests.sh); `make tier` before the build.
#
# IAP_WORKER_PREVIOUS_REV names the revision (default below: the last commit whose schema ends at 008_further_revocations,
# before 009_set_aside_and_sources). When a migration is added, set the default to the last commit before it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
swift=${SWIFT:-swift}
rev=${IAP_WORKER_PREVIOUS_REV:-568da40a7473ec187894b650f5a52d8862102814}
commit=$(git -C "$root" rev-parse --verify "$rev^{commit}")
cache=$("$root/scripts/cache-dir.sh")
scratch=$(cd "$root" && realpath -m "${SWIFT_SCRATCH:-.build}")
# Keyed by the commit, the toolchain and the build flags: a new Swift, or other flags, build it again.
toolchain=$("$swift" --version 2>/dev/null | head -1)
key=$(printf '%s\n%s\n' "$toolchain" "${SWIFT_BUILD_FLAGS:-}" | sha256sum | cut -c1-12)
out="$cache/previous/$commit-$key"
if [[ -x "$out/iap-worker" ]]; then
    echo "$out/iap-worker"
    exit 0
fi
src="$root/.build/previous-src"
rm -rf "$src"
mkdir -p "$src" "$cache/previous"
git -C "$root" archive "$commit" | tar -x -C "$src"
# The dependency versions this checkout resolved, when it has, so both builds use the same ones.
if [[ -f "$root/Package.resolved" ]]; then cp "$root/Package.resolved" "$src/Package.resolved"; fi
echo "building iap-worker at ${commit:0:12} (the version before the newest migration) into $out…" >&2
# The same flags as this version's build (SWIFT_BUILD_FLAGS, from the Makefile), or the dependencies would be
# compiled twice.
# shellcheck disable=SC2086 # the flags are words
"$swift" build --package-path "$src" --scratch-path "$scratch" --product iap-worker ${SWIFT_BUILD_FLAGS:-} >&2
# Written aside, then moved: a reader (another clone's run) sees the whole executable or none.
staging=$(mktemp -d "$cache/previous/.staging.XXXXXX")
cp "$scratch/debug/iap-worker" "$staging/iap-worker"
printf '%s\n%s\n%s\n' "$commit" "$toolchain" "${SWIFT_BUILD_FLAGS:-}" >"$staging/built-from"
# Another clone may have put it there meanwhile, and may be running it: its copy stays, this one goes.
if [[ -x "$out/iap-worker" ]] || ! mv -T "$staging" "$out" 2>/dev/null; then rm -rf "$staging"; fi
# This version's build must not find the previous one's executable and take it for its own.
rm -f "$scratch/debug/iap-worker"
rm -rf "$src"
echo "$out/iap-worker"
