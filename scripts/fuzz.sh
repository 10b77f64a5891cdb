#!/usr/bin/env bash
# The libFuzzer targets of FuzzTesting/ (docs/fuzzing.md), built with libFuzzer and AddressSanitizer in the build cache
# (scripts/cache-dir.sh: fuzz-build/), which outlives the clone: a later build, from any clone on the machine, compiles
# only this package's modules again, not the sanitized dependencies (swift-crypto's BoringSSL above all).
#
#   scripts/fuzz.sh build            build the targets
#   scripts/fuzz.sh run SECONDS      build, then fuzz each target for SECONDS, one after the other (`make fuzz`)
#   scripts/fuzz.sh smoke            build, run every corpus input once, then fuzz each target briefly (`make test`)
#   scripts/fuzz.sh TARGET [ARG…]    run one built target with libFuzzer's own arguments (a crash file to reproduce)
#
# Inputs the fuzzers find go to .fuzz/corpus/<target>/, crashes to .fuzz/artifacts/ (both git-ignored); the
# seed corpus in FuzzTesting/Corpus/ is only read. Any crash, failed check, leak or timeout exits non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."

SWIFT=${SWIFT:-swift}
# libFuzzer reports crashes itself (and saves the input); Swift's backtracer would take the signal first and, with
# no terminal, can hang on the dead process.
export SWIFT_BACKTRACE=enable=no
SCRATCH=${IAP_FUZZ_SCRATCH:-$(scripts/cache-dir.sh)/fuzz-build}
TARGETS=(FuzzPurchaseRecord FuzzGamebaseAnswer FuzzStoreNotification)
# SMOKE_SECONDS of fuzzing per target after the corpus replay.
SMOKE_SECONDS=${SMOKE_SECONDS:-20}
# A purchase record input holds up to four records with their values: larger than libFuzzer's 4 KiB default.
declare -A MAX_LEN=([FuzzPurchaseRecord]=20000 [FuzzGamebaseAnswer]=8192 [FuzzStoreNotification]=16384)

# FUZZ_SKIP_BUILD=1: the targets are built already (run `scripts/fuzz.sh build` on its own, e.g. under a lock that
# serialises builds on a shared machine, and fuzz without holding it).
# The built targets, copied out of the shared cache into this clone: another clone's build can relink the cache's
# copies at any moment, and this run must fuzz this clone's code.
BIN=.build/fuzz-bin

build() {
  [ "${FUZZ_SKIP_BUILD:-}" = 1 ] && return
  # The linker warns once per AddressSanitizer helper it cannot export (hundreds of lines, harmless): left out.
  # SwiftPM passes the two sanitizers to swiftc as two `-sanitize=` options in no fixed order, and swiftc keeps
  # the last: a build had either coverage (libFuzzer searched blind to nothing) or AddressSanitizer, never both.
  # The combined option, given last, asks for both.
  # No index store: nothing reads it, and it costs every compile (a fuzz build is never opened in an editor).
  "$SWIFT" build --package-path FuzzTesting --scratch-path "$SCRATCH" --sanitize=fuzzer --sanitize=address \
    -Xswiftc -sanitize=address,fuzzer --disable-index-store 2>&1 |
    { grep -v "warning: Cannot export local symbol '__asan" || true; }
  local built
  built=$("$SWIFT" build --package-path FuzzTesting --scratch-path "$SCRATCH" --sanitize=fuzzer --sanitize=address \
    -Xswiftc -sanitize=address,fuzzer --disable-index-store --show-bin-path)
  mkdir -p "$BIN"
  for target in "${TARGETS[@]}"; do cp "$built/$target" "$BIN/$target.new" && mv "$BIN/$target.new" "$BIN/$target"; done
}

binary() {
  echo "$BIN/$1"
}

# fuzz TARGET [libFuzzer arguments…]: runs a target over its work corpus and the seed corpus.
fuzz() {
  local target=$1
  shift
  mkdir -p ".fuzz/corpus/$target" .fuzz/artifacts
  # Fuzzing runs at the lowest priority and never under the build lock: it is long, and builds must go on.
  nice -n 19 "$(binary "$target")" -dict="FuzzTesting/$target.dict" -max_len="${MAX_LEN[$target]}" -timeout=10 \
    -rss_limit_mb=4096 -artifact_prefix=".fuzz/artifacts/$target-" -print_final_stats=1 "$@" \
    ".fuzz/corpus/$target" "FuzzTesting/Corpus/$target"
}

case "${1:-}" in
  build)
    build
    ;;
  run)
    seconds=${2:?usage: scripts/fuzz.sh run SECONDS}
    build
    for target in "${TARGETS[@]}"; do
      echo "fuzz: $target for $seconds s" >&2
      fuzz "$target" -max_total_time="$seconds"
    done
    ;;
  smoke)
    build
    # The targets side by side (each fuzzes for SMOKE_SECONDS of wall time, whatever the cores), each into a log of
    # its own, shown in turn.
    pids=()
    for target in "${TARGETS[@]}"; do
      {
        echo "fuzz smoke: $target: every corpus input once, then $SMOKE_SECONDS s of fuzzing"
        # -runs=0 replays the corpus and stops; the seeds and every crash ever found are in it.
        fuzz "$target" -runs=0 && fuzz "$target" -max_total_time="$SMOKE_SECONDS" -seed=1
      } >".build/fuzz-smoke-$target.log" 2>&1 &
      pids+=($!)
    done
    status=0
    for index in "${!TARGETS[@]}"; do
      wait "${pids[$index]}" || status=1
      cat ".build/fuzz-smoke-${TARGETS[$index]}.log" >&2
    done
    exit "$status"
    ;;
  FuzzPurchaseRecord | FuzzGamebaseAnswer | FuzzStoreNotification)
    target=$1
    shift
    nice -n 19 "$(binary "$target")" -dict="FuzzTesting/$target.dict" -max_len="${MAX_LEN[$target]}" "$@"
    ;;
  *)
    sed -n '2,11p' "$0" >&2
    exit 2
    ;;
esac
