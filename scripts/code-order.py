#!/usr/bin/env python3
"""Writes deploy/iap-worker.order: the order in which lld lays out iap-worker's functions, those a worker runs first.

A release build of the worker has ~21 MB of machine code, laid out by module and source file. The kernel maps a file's
pages 64 KB at a time around each page a process touches, so the few thousand functions a worker runs, spread over all
of it, kept ~18 MiB of the executable resident (docs/benchmarks.md, "Code laid out by use"). `make release` compiles
every function into a section of its own and has lld lay out the functions this file names first, in its order.

`make code-order` runs the two steps:

    scripts/code-order.py record INSTRUMENTED RELEASE IAP-DEV [--ledger-url URL]
        Runs `IAP-DEV bench mixed --valid 10000` (SQLite, and PostgreSQL when a URL is given) with RELEASE under
        `perf record`, then with INSTRUMENTED, a release build of the worker compiled with `-Xswiftc -profile-generate
        -Xcc -fprofile-instr-generate` (and scripts/profile-exit.c). Lists the functions perf sampled, most samples
        first (the hot path, with the specialisations and thunks the instrumentation does not count); then those the
        instrumentation counted, most calls first (start-up, the periodic passes, the rarer outcomes), each followed by
        the pieces the compiler emitted apart from it (async resumptions, partial-application forwarders, merged
        copies); then every type-metadata accessor and outlined value operation of RELEASE (`nm`): small, called once
        per type from anywhere, and together a few hundred KB. Only names RELEASE has are kept.
    scripts/code-order.py refine RELEASE IAP-DEV --relink COMMAND [--rounds N] [--ledger-url URL]
        Up to N times (14): relinks RELEASE with the file as it is (COMMAND), runs the same bench under
        `perf record -d -e page-faults`, and adds the functions whose own code page faulted and the file does not
        list yet, and those at the instruction of any other fault (a first touch of the heap, a stack, a table: they
        ran too). A fault maps the 64 KB around it, so a round finds one function of each such block; the rounds stop
        when one finds none.

A name lld no longer finds is skipped (`--no-warn-symbol-ordering`), and a function no run reached keeps its place
after the listed ones: a stale file costs resident pages, never correctness. perf follows the bench and the worker it
starts (kernel.perf_event_paranoid <= 2 is enough; no system-wide profile). Needs `perf` (Debian's linux-perf) and the
toolchain's llvm-profdata (LLVM_PROFDATA, else the one beside `swift`). The file is replaced whole after each step, so
an interrupted run leaves the last complete one.
"""
import argparse
import collections
import functools
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.normpath(os.path.join(HERE, "..", "deploy", "iap-worker.order"))
HEADER = (
    "# iap-worker's functions in the order lld lays them out (scripts/code-order.py, `make code-order`;\n"
    "# docs/benchmarks.md, \"Code laid out by use\"). Generated: sampled, counted (each with its pieces), the runtime\n"
    "# helpers, then found faulting, in that order.\n"
)
# Type-metadata accessors and initialisers, lazy witness-table accessors, outlined copies and destroys of values.
RUNTIME_HELPER = re.compile(r"^\$s.*(Ma|Mr|Mi|Wl|WOy|WOe|WOh|WOc|WOb|WOd|WOs|WOr)$")


def perf_script(data, fields):
    return subprocess.run(
        ["perf", "script", "-i", data, "-F", fields, "--no-demangle"],
        check=True, capture_output=True, text=True, errors="replace").stdout


@functools.lru_cache(maxsize=None)
def resolved(path):
    """A dso path as perf prints it, resolved once: a profile names the same few files hundreds of thousands of times."""
    return os.path.realpath(path)


def usable(symbol):
    # "[unknown]": no symbol; "@": a PLT stub, not a function of the executable.
    return bool(symbol) and symbol != "[unknown]" and "@" not in symbol


def parse_samples(text, executable):
    """Samples per function of the executable at path `executable`, from `perf script -F ip,sym,dso`."""
    seen = collections.Counter()
    for line in text.splitlines():
        # "<address> <symbol>+<offset> (<dso path>)"
        match = re.match(r"\s*[0-9a-f]+\s+(\S+)\s+\(([^()]*)\)\s*$", line)
        if match and resolved(match.group(2)) == executable:
            symbol = match.group(1).split("+0x")[0]
            if usable(symbol):
                seen[symbol] += 1
    return seen


def parse_faults(text, executable):
    """From `perf script -F addr,ip,sym,dso` of a page-fault profile: the functions of the executable at path
    `executable` that ran (those at a fault's instruction, whatever page it touched), and how many faults were of its
    own code pages (the fault's address is the instruction's)."""
    ran = collections.Counter()
    code = 0
    for line in text.splitlines():
        # The data address's mapping may hold anything, ")" included: only the instruction's part is read from the end.
        match = re.match(r"\s*([0-9a-f]+)\s.*\s([0-9a-f]+)\s+(\S+)\s+\(([^()]*)\)\s*$", line)
        if not match or resolved(match.group(4)) != executable:
            continue
        symbol = match.group(3).split("+0x")[0]
        if usable(symbol):
            ran[symbol] += 1
        if int(match.group(1), 16) == int(match.group(2), 16):
            code += 1
    return ran, code


def parse_profile(text):
    """Calls per function counted by the instrumentation (entry count > 0), from `llvm-profdata show
    --all-functions`."""
    calls = {}
    name = None
    for line in text.splitlines():
        # "  <name>:" opens a function ("<file>:<name>" for a file-local one, whose symbol is the name), then
        # "    Function count: N" among its details.
        if line.startswith("  ") and not line.startswith("   ") and line.endswith(":"):
            name = line.strip()[:-1].rsplit(":", 1)[-1]
        elif line.strip().startswith("Function count:") and name:
            count = int(line.split(":", 1)[1])
            if count > 0:
                calls[name] = max(count, calls.get(name, 0))
            name = None
    return calls


def executed(profdata):
    show = subprocess.run(
        [profdata_tool(), "show", "--all-functions", profdata],
        check=True, capture_output=True, text=True, errors="replace").stdout
    return parse_profile(show)


# The pieces of a listed function the compiler emits apart: an async function's resumptions (TY<n>_, TQ<n>_), a
# closure's partial-application forwarder (TA), merged copies (Tm), a coroutine accessor's continuations (.resume.<n>).
PIECE = re.compile(r"^(.*?)(?:(?:TY\d+_|TQ\d+_|TA|Tm)+(?:\.\d+)?|\.resume\.\d+)$")


def with_pieces(order, present, known=()):
    """`order`, each function followed by the pieces of it (`PIECE`) among `present` (the executable's functions)
    that neither `order` nor `known` lists."""
    pieces = collections.defaultdict(list)
    for symbol in present:
        match = PIECE.match(symbol)
        if match:
            pieces[match.group(1)].append(symbol)
    result, seen = [], set(order) | set(known)
    for symbol in order:
        result.append(symbol)
        for piece in sorted(pieces.get(symbol, ())):
            if piece not in seen:
                seen.add(piece)
                result.append(piece)
    return result


def symbols(release):
    """The executable's functions (`nm`): read once per step, the executable being ~70 MB."""
    names = subprocess.run(["nm", release], check=True, capture_output=True, text=True).stdout
    return {p[2] for p in (line.split() for line in names.splitlines()) if len(p) == 3 and p[1] in "tTwW"}


def profdata_tool():
    if os.environ.get("LLVM_PROFDATA"):
        return os.environ["LLVM_PROFDATA"]
    swift = shutil.which("swift")
    if swift:
        beside = os.path.join(os.path.dirname(os.path.realpath(swift)), "llvm-profdata")
        if os.path.exists(beside):
            return beside  # the toolchain's, which reads its own instrumentation's format
    return "llvm-profdata"


def by_count(counter):
    return [symbol for symbol, _ in sorted(counter.items(), key=lambda item: (-item[1], item[0]))]


def listed(out=OUT):
    with open(out) as file:
        return [line.strip() for line in file if line.strip() and not line.startswith("#")]


def write(symbols, out=OUT):
    """Replaces `out` whole: an interrupted run leaves the previous file, never part of one."""
    partial = out + ".partial"
    try:
        with open(partial, "w") as file:
            file.write(HEADER)
            for symbol in symbols:
                file.write(symbol + "\n")
        os.replace(partial, out)
    except BaseException:
        if os.path.exists(partial):
            os.remove(partial)
        raise


def run_bench(iap_dev, worker, perf_arguments, data, extra=()):
    """The mixed bench under perf, which follows the bench's children (the worker among them)."""
    subprocess.run(
        ["perf", "record", "-q", "--no-buildid-cache", "-o", data] + perf_arguments
        + ["--", iap_dev, "bench", "mixed", "--valid", "10000", "--worker", worker] + list(extra),
        check=True, stdout=subprocess.DEVNULL)


def record(instrumented, release, iap_dev, ledger_url=None):
    runs = [[]] + ([["--ledger-url", ledger_url]] if ledger_url else [])
    with tempfile.TemporaryDirectory(prefix="code-order-") as folder:
        # Samples from the release worker itself: the instrumented one inlines, specialises and merges otherwise.
        samples = collections.Counter()
        for index, extra in enumerate(runs):
            data = os.path.join(folder, f"samples{index}.data")
            run_bench(iap_dev, release, ["-F", "4999"], data, extra)
            samples.update(parse_samples(perf_script(data, "ip,sym,dso"), os.path.realpath(release)))
        # The bench gives the worker a clean environment: a wrapper tells the instrumentation where to write.
        wrapper = os.path.join(folder, "worker.sh")
        with open(wrapper, "w") as file:
            file.write(
                f'#!/bin/sh\nLLVM_PROFILE_FILE="{folder}/%p.profraw" exec "{os.path.abspath(instrumented)}" "$@"\n')
        os.chmod(wrapper, 0o755)
        for extra in runs:
            subprocess.run(
                [iap_dev, "bench", "mixed", "--valid", "10000", "--worker", wrapper] + extra,
                check=True, stdout=subprocess.DEVNULL)
        raw = [path for path in glob.glob(os.path.join(folder, "*.profraw")) if os.path.getsize(path) > 0]
        if not raw:
            sys.exit("code-order: the worker wrote no profile: was it built with -profile-generate and profile-exit.c?")
        merged = os.path.join(folder, "worker.profdata")
        subprocess.run([profdata_tool(), "merge", "-o", merged] + raw, check=True)
        calls = executed(merged)
    if len(samples) < 100 or len(calls) < 100:
        sys.exit(f"code-order: {len(samples)} functions sampled, {len(calls)} counted: did the worker run?")
    present = symbols(release)
    order = by_count(samples)
    order += [symbol for symbol in by_count(calls) if symbol not in samples]
    order = with_pieces([symbol for symbol in order if symbol in present], present)
    seen = set(order)
    order += sorted(symbol for symbol in present if RUNTIME_HELPER.search(symbol) and symbol not in seen)
    write(order)
    print(f"code-order: {len(order)} functions ({len(samples)} sampled, {len(calls)} counted)", file=sys.stderr)


def refine(release, iap_dev, relink, rounds, ledger_url=None):
    runs = [[]] + ([["--ledger-url", ledger_url]] if ledger_url else [])
    for round in range(1, rounds + 1):
        relink_checked(relink, release)
        ran, code = collections.Counter(), 0
        with tempfile.TemporaryDirectory(prefix="code-order-") as folder:
            for index, extra in enumerate(runs):
                data = os.path.join(folder, f"faults{index}.data")
                run_bench(iap_dev, release, ["-d", "-e", "page-faults", "-c", "1"], data, extra)
                found, faulted = parse_faults(perf_script(data, "addr,ip,sym,dso"), os.path.realpath(release))
                ran.update(found)
                code += faulted
        order = listed()
        known = set(order)
        new = [symbol for symbol in by_count(ran) if symbol not in known]
        print(f"code-order: round {round}: {code} faults on its code pages, {len(new)} functions added",
              file=sys.stderr)
        if not new:
            return  # linked with the file as it is
        write(order + with_pieces(new, symbols(release), known))
    # The last round's additions, linked (also with no round at all: the file `record` wrote).
    relink_checked(relink, release)


def relink_checked(relink, release, out=OUT):
    """Runs `relink`, which must link `release` again with the file as it is: a round that profiled an executable
    linked before would add what another layout faulted in (a `make -n`, a build that found nothing to do)."""
    subprocess.run(relink, shell=True, check=True, stdout=subprocess.DEVNULL)
    if not os.path.exists(release) or os.path.getmtime(release) < os.path.getmtime(out):
        sys.exit(f"code-order: `{relink}` did not link {release} again after {out} changed")


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    steps = parser.add_subparsers(dest="step", required=True)
    record_step = steps.add_parser("record")
    record_step.add_argument("instrumented")
    record_step.add_argument("release")
    record_step.add_argument("iap_dev")
    record_step.add_argument("--ledger-url")
    refine_step = steps.add_parser("refine")
    refine_step.add_argument("release")
    refine_step.add_argument("iap_dev")
    refine_step.add_argument("--relink", required=True)
    refine_step.add_argument("--rounds", type=int, default=14)
    refine_step.add_argument("--ledger-url")
    arguments = parser.parse_args(argv)
    if arguments.step == "record":
        record(arguments.instrumented, arguments.release, arguments.iap_dev, arguments.ledger_url)
    else:
        refine(arguments.release, arguments.iap_dev, arguments.relink, max(0, arguments.rounds), arguments.ledger_url)


if __name__ == "__main__":
    main(sys.argv[1:])
