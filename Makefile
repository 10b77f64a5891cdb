# The two commands of the README's quick start, and a few helpers.
SWIFT ?= swift

.PHONY: deps demo test sanitize build release clean

deps:
	@scripts/install-deps.sh

## Runs the embedded demo (mock Kafka, Gamebase simulator, SQLite ledger in a temporary folder).
demo: deps
	$(SWIFT) run iap-worker demo

## Runs the whole test suite: the deployment and interface documents (scripts/check-deploy.sh), then unit,
## mock-cluster, simulator, database, end-to-end and process-level tests. A throw-away PostgreSQL
## server is started on loopback for it (scripts/test-postgres.sh) and stopped afterwards; it speaks TLS with a
## certificate from a test CA, whose path the TLS tests read from IAP_TEST_POSTGRES_CA.
test: deps
	scripts/check-deploy.sh
	$(SWIFT) build --build-tests
	@url=$$(scripts/test-postgres.sh start) && ca=$$(scripts/test-postgres.sh ca) && echo "IAP_TEST_POSTGRES_CA=$$ca" && \
	  IAP_TEST_POSTGRES_URL="$$url" IAP_TEST_POSTGRES_CA="$$ca" $(SWIFT) test --skip-build; status=$$?; \
	  scripts/test-postgres.sh stop; exit $$status

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
