// swift-tools-version:6.1
import PackageDescription

/// Every target of ours: the upcoming features the code is written for, and warnings as errors (our code builds
/// without one; a dependency's warnings are its own and never stop a build).
let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .unsafeFlags(["-warnings-as-errors"]),
]

// The module graph (docs/architecture.md): the core (Fulfilment) owns every port and links no NIO, no SQL driver and
// no librdkafka; adapters (Ledger, GamebaseHTTP, Kafka) and the engine depend on it; the composition root (App) and
// the surfaces (Lookup, Console, EventTail) sit outside; the development tools (simulators, the mock cluster, demo,
// bench) are linked by `iap-dev` and the tests only. `scripts/check-imports.py` keeps the arrows pointing this way.
let package = Package(
    name: "iap-worker",
    platforms: [.macOS(.v15)],
    products: [
        /// What an operator deploys: run, reprocess, reconcile, ledger, find, events, check-config.
        .executable(name: "iap-worker", targets: ["iap-worker"]),
        /// The development tooling: demo, bench, dev-kafka, gamebase-sim. Not in the image.
        .executable(name: "iap-dev", targets: ["iap-dev"]),
        // For the fuzz targets, a package of their own in FuzzTesting/ that depends on this one by path (so that a
        // build of this package never links them). Not an API for other packages.
        .library(name: "IAPFuzzable", targets: ["Wire", "Gamebase", "Fulfilment", "InMemoryLedger", "Stores"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio", from: "2.81.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.6.0"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.25.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.27.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.10.0"),
        // Already in the graph through hummingbird: the console names HTTP header fields.
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.0.0"),
        .package(url: "https://github.com/apple/swift-collections", from: "1.1.0"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.0.0"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.25.0"),
        // Already in the graph through postgres-nio (which takes 3.9 up to 6): the same range, so it resolves alike.
        .package(url: "https://github.com/apple/swift-crypto", "3.9.0"..<"6.0.0"),
        .package(url: "https://github.com/apple/swift-configuration", from: "1.0.0", traits: [.defaults, "YAML"]),
        .package(url: "https://github.com/jpsim/Yams", from: "6.0.0"),
        .package(url: "https://github.com/apple/swift-system", from: "1.5.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.0.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.1.0"),
        // Already in the graph through async-http-client: X.509 chains of App Store JWS, and the DER they are made of.
        .package(url: "https://github.com/apple/swift-certificates", from: "1.0.0"),
        .package(url: "https://github.com/apple/swift-asn1", from: "1.0.0"),
    ],
    targets: [
        // MARK: The core and its ports

        /// The hand-written JSON, UTF-8, decimal and RFC 3339 readers and writers (Foundation only).
        .target(
            name: "Wire", dependencies: [.product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: strictSettings),
        /// The stores' refund notifications: Google's real-time developer notifications and App Store Server
        /// Notifications V2 read into the core's StoreNotification, Apple's JWS verified to Apple Root CA – G3 (Foundation, Wire, Crypto,
        /// X509; no I/O).
        .target(
            name: "Stores",
            dependencies: [
                "Fulfilment",
                "Wire",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ],
            swiftSettings: strictSettings),
        /// The App Store Server API port over HTTPS: Get Notification History and Send Consumption Information, each
        /// call signed with the studio's ES256 key.
        .target(
            name: "AppStoreHTTP",
            dependencies: [
                "Fulfilment",
                "Wire",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: strictSettings),
        /// Google Play's Voided Purchases API over HTTPS, authorised by a service account (OAuth 2.0 JWT-bearer, RS256).
        .target(
            name: "GooglePlayHTTP",
            dependencies: [
                "Fulfilment",
                "Wire",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: strictSettings),
        /// The Gamebase port: the API protocol, its models, result codes, errors and retry policy (Foundation only).
        .target(name: "Gamebase", dependencies: ["Wire"], swiftSettings: strictSettings),
        /// The core: purchase messages, the consume flow, events, and every port it sees (ledger roles, event
        /// publisher, purchase and dead-letter sources, clock, status).
        .target(
            name: "Fulfilment",
            dependencies: [
                "Gamebase",
                "Wire",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
        /// The engine and the background services (sweeper, reconciler, retention, reprocess) over the core's ports
        /// and an injected clock.
        .target(
            name: "Engine",
            dependencies: [
                "Fulfilment",
                "Gamebase",
                "Wire",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "DequeModule", package: "swift-collections"),
            ],
            swiftSettings: strictSettings
        ),

        // MARK: Adapters

        .systemLibrary(
            name: "CRdKafka",
            pkgConfig: "rdkafka",
            providers: [.apt(["librdkafka-dev"]), .brew(["librdkafka"])]
        ),
        /// Swift over librdkafka: consumer, producer, configuration, errors, statistics.
        .target(
            name: "Kafka",
            dependencies: [
                "CRdKafka",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "DequeModule", package: "swift-collections"),
            ],
            swiftSettings: strictSettings
        ),
        /// The Gamebase port's HTTP/1 client over SwiftNIO.
        .target(
            name: "GamebaseHTTP",
            dependencies: [
                "Gamebase",
                "Wire",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "DequeModule", package: "swift-collections"),
            ],
            swiftSettings: strictSettings
        ),
        /// The ledger's SQL stores (SQLite through GRDB, PostgreSQL through postgres-nio): each plays every role.
        .target(
            name: "Ledger",
            dependencies: [
                "Fulfilment",
                "Wire",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictSettings
        ),

        // MARK: Surfaces for people

        /// `find`: which id is which, purchase timelines, the read-only Gamebase comparison (over the history role).
        .target(name: "Lookup", dependencies: ["Fulfilment", "Gamebase", "Wire"], swiftSettings: strictSettings),
        /// The operator console: pages over the history role and the worker's status.
        .target(
            name: "Console",
            dependencies: [
                "Fulfilment",
                "Gamebase",
                "Lookup",
                "Wire",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictSettings
        ),
        /// `events tail`: the worker's own topics, read without a group.
        .target(
            name: "EventTail", dependencies: ["Kafka", "Fulfilment", "Gamebase", "Wire"], swiftSettings: strictSettings),

        // MARK: The composition root and the executables

        /// Configuration, the Kafka adapters of the ports, metrics, logs, the admin server and the composition root.
        .target(
            name: "App",
            dependencies: [
                "Engine",
                "Fulfilment",
                "Gamebase",
                "GamebaseHTTP",
                "Ledger",
                "Kafka",
                "Console",
                "Stores",
                "AppStoreHTTP",
                "GooglePlayHTTP",
                "Wire",
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictSettings
        ),
        /// What `iap-worker run` sets up at load, before any library's initialiser and any thread: a handler that
        /// remembers SIGTERM and SIGINT, so a stop in its first moments ends in a graceful exit, not the default
        /// action; and two to four malloc arenas. C, because only a load-time constructor runs that early (and glibc's
        /// malloc_trim, which `run` calls every 30 s, is C only).
        .target(name: "RunAtLoad"),
        .executableTarget(
            name: "iap-worker",
            dependencies: [
                "App",
                "AppStoreHTTP",
                "RunAtLoad",
                "Engine",
                "EventTail",
                "Fulfilment",
                "Gamebase",
                "GamebaseHTTP",
                "GooglePlayHTTP",
                "Kafka",
                "Ledger",
                "Lookup",
                "Wire",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictSettings
        ),

        // MARK: Development tools (iap-dev and the tests; never the image)

        /// librdkafka's mock cluster (`rdkafka_mock.h`).
        .target(
            name: "KafkaTesting",
            dependencies: ["Kafka", "CRdKafka", .product(name: "Logging", package: "swift-log")],
            swiftSettings: strictSettings
        ),
        /// The App Store Server API simulator (notification history, consumption information) and the test chain it
        /// signs with: test rig, never shipped.
        .target(
            name: "AppStoreSimulator",
            dependencies: [
                "Stores",
                "SimulatorServer",
                "Wire",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: strictSettings),
        /// The HTTP server and the body reading the simulators share: test rig, never shipped.
        .target(
            name: "SimulatorServer",
            dependencies: [
                "Wire",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: strictSettings),
        /// Google Play's Voided Purchases API and Google's token endpoint, with their documented limits: test rig, never
        /// shipped.
        .target(
            name: "GooglePlaySimulator",
            dependencies: [
                "SimulatorServer",
                "Wire",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: strictSettings),
        /// The Gamebase API simulator: a Hummingbird server with seeding, latency and fault injection.
        .target(
            name: "GamebaseSimulator",
            dependencies: [
                "Gamebase",
                "SimulatorServer",
                "Wire",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
            ],
            swiftSettings: strictSettings
        ),
        /// The memory ledger: every role of the ledger over tables in memory, held to the SQL stores by the conformance
        /// suites (Tests/ConformanceTests). Test rig: the tests (through IAPTestSupport) and the fuzz targets (through
        /// IAPFuzzable) run on it; `iap-worker` never links it.
        .target(name: "InMemoryLedger", dependencies: ["Fulfilment"], swiftSettings: strictSettings),
        /// The in-process sandbox (mock cluster, simulator, a worker), the demo and the benchmarks.
        .target(
            name: "Sandbox",
            dependencies: [
                "App",
                "Console",
                "Engine",
                "Fulfilment",
                "Gamebase",
                "GamebaseHTTP",
                "GamebaseSimulator",
                "GooglePlayHTTP",
                "GooglePlaySimulator",
                "Kafka",
                "KafkaTesting",
                "Ledger",
                "Wire",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "iap-dev",
            dependencies: [
                "App",
                "AppStoreSimulator",
                "GooglePlayHTTP",
                "GooglePlaySimulator",
                "Engine",
                "Fulfilment",
                "GamebaseSimulator",
                "Kafka",
                "KafkaTesting",
                "Ledger",
                "Lookup",
                "Sandbox",
                "Wire",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictSettings
        ),

        // MARK: Tests, one target per tier (docs/architecture.md#tests says what each needs and how to run one).
        // `make check` runs UnitTests and ConformanceTests; `make test` runs every tier on Debian's librdkafka, then the
        // tests tagged `.librdkafka` again on the current one (scripts/test-lanes.py).

        /// Fakes, clocks, the test PostgreSQL server and the tags every tier shares.
        .target(
            name: "IAPTestSupport",
            dependencies: [
                "Engine",
                "Fulfilment",
                "Gamebase",
                "InMemoryLedger",
                "Ledger",
                "Wire",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/IAPTestSupport",
            swiftSettings: strictSettings
        ),
        /// The whole worker in process (EndToEndSystem) and as processes (ChildProcess, ProcessCluster): what the
        /// end-to-end, process, broker and browser tiers start. Read with `@testable import` (tests build with
        /// testability), so its declarations stay internal.
        .target(
            name: "SystemTestSupport",
            dependencies: [
                "App",
                "Fulfilment",
                "Gamebase",
                "GamebaseHTTP",
                "GamebaseSimulator",
                "IAPTestSupport",
                "Kafka",
                "KafkaTesting",
                "Ledger",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Tests/SystemTestSupport",
            swiftSettings: strictSettings
        ),
        /// Unit: one module at a time, in process (a folder per module); loopback sockets and temporary files at most.
        .testTarget(
            name: "UnitTests",
            dependencies: [
                "App",
                "AppStoreHTTP",
                "AppStoreSimulator",
                "GooglePlayHTTP",
                "GooglePlaySimulator",
                "Console",
                "Engine",
                "EventTail",
                "Fulfilment",
                "Gamebase",
                "GamebaseHTTP",
                "GamebaseSimulator",
                "IAPTestSupport",
                "InMemoryLedger",
                "Kafka",
                "KafkaTesting",
                "Lookup",
                "RunAtLoad",
                "Sandbox",
                "Stores",
                "Wire",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictSettings
        ),
        /// Conformance: every ledger operation on SQLite, PostgreSQL (the test server) and memory alike, and each SQL
        /// store's own start-up, migration and URL rules.
        .testTarget(
            name: "ConformanceTests",
            dependencies: [
                "Engine",
                "Fulfilment",
                "IAPTestSupport",
                "InMemoryLedger",
                "KafkaTesting",
                "Ledger",
                "Lookup",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
        /// Kafka adapter: the Kafka layer and the adapters over it (the event follower, the dead-letter reader, the
        /// strict configuration) on librdkafka's mock cluster, or on Tansu with `IAP_TEST_KAFKA_BROKER=tansu`.
        .testTarget(
            name: "KafkaTests",
            dependencies: [
                "App",
                "CRdKafka",
                "EventTail",
                "Fulfilment",
                "IAPTestSupport",
                "Kafka",
                "KafkaTesting",
                "Sandbox",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
        /// End to end, in process: the worker with the simulators and the mock cluster in this process (the sandbox),
        /// and what outside consumers (the CloudEvents SDK) read of it.
        .testTarget(
            name: "EndToEndTests",
            dependencies: [
                "App",
                "AppStoreHTTP",
                "AppStoreSimulator",
                "Engine",
                "Fulfilment",
                "Gamebase",
                "GamebaseHTTP",
                "GamebaseSimulator",
                "IAPTestSupport",
                "Kafka",
                "Ledger",
                "SystemTestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
        /// Process: the built `iap-worker` and `iap-dev` as processes, killed at random moments, several instances in
        /// one group, against `iap-dev dev-kafka` (or Tansu), `iap-dev gamebase-sim` and real databases.
        .testTarget(
            name: "ProcessTests",
            dependencies: [
                "App",
                "AppStoreHTTP",
                "AppStoreSimulator",
                "Engine",
                "Fulfilment",
                "Gamebase",
                "GamebaseHTTP",
                "GamebaseSimulator",
                "GooglePlayHTTP",
                "GooglePlaySimulator",
                "IAPTestSupport",
                "Kafka",
                "KafkaTesting",
                "Ledger",
                "Lookup",
                "Sandbox",
                "Stores",
                "SystemTestSupport",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
            ],
            swiftSettings: strictSettings
        ),
        /// Broker: a real broker process (Tansu) the test starts itself, whatever broker the run is on.
        .testTarget(
            name: "BrokerTests",
            dependencies: ["IAPTestSupport", "Kafka", "KafkaTesting", "SystemTestSupport"],
            swiftSettings: strictSettings
        ),
        /// Browser: the operator console in Debian's headless Chromium, driven by Selenium (scripts/).
        .testTarget(
            name: "BrowserTests",
            dependencies: [
                "App",
                "Console",
                "Engine",
                "Gamebase",
                "GamebaseSimulator",
                "IAPTestSupport",
                "KafkaTesting",
                "Sandbox",
                "SystemTestSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            swiftSettings: strictSettings
        ),
        /// Slow: tests too long for `make check`'s loop (a ledger of a million rows); `make test` runs them.
        .testTarget(
            name: "SlowTests",
            dependencies: [
                "Fulfilment",
                "IAPTestSupport",
                "Ledger",
                "Lookup",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            swiftSettings: strictSettings
        ),
    ]
)
