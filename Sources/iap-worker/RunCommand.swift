import App
import ArgumentParser
import Foundation
import Kafka
import Logging
import RunAtLoad
import UnixSignals

#if canImport(Glibc)
    import Glibc
#endif

struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Runs the worker daemon until SIGTERM or SIGINT.",
        discussion: """
            Configuration: the YAML file given with --config (or IAP_WORKER_CONFIG), overridden by environment \
            variables named after the keys (kafka.group_id -> KAFKA_GROUP_ID). See config/iap-worker.yaml.
            """
    )

    @Option(name: .customLong("config"), help: "YAML configuration file (default: $IAP_WORKER_CONFIG).")
    var configFile: String?

    func run() async throws {
        // Trapped before anything else, the configuration's loading included: a SIGTERM in the first moments of
        // start-up (an orchestrator stopping a pod it just started) then ends in a graceful exit 0, not in the default
        // action. Until this line a handler installed at load (RunAtLoad) remembers a stop; it is raised again
        // now, for the sequence. Only the dynamic loader's milliseconds are left to the default action.
        let signals = await UnixSignalsSequence(trapping: .sigterm, .sigint)
        let caughtAtLoad = iap_stop_signal_caught_at_load()
        if caughtAtLoad != 0 { kill(getpid(), caughtAtLoad) }
        // A closed standard output (its reader gone) costs log lines, not the daemon: write(2) then fails with
        // EPIPE, which LogOutput drops, instead of SIGPIPE ending the process mid-purchase.
        signal(SIGPIPE, SIG_IGN)
        // Before the admin server's Date-header cache makes its calendar: a UTC system zone is named GMT, which
        // Foundation keeps without ICU's zone tables.
        let namedGMT = UTCDefaultTimeZone.applyWhereTheSystemIsUTC()
        let configuration = try await WorkerConfiguration.load(configFile: configFile)
        LoggingSetup.bootstrap(format: configuration.logFormat, level: configuration.logLevel)
        let logger = Logger(label: "iap-worker")
        // Set at load (RunAtLoad): one malloc arena per core, two to four, unless the environment set the limit.
        let arenaLimit = iap_malloc_arena_limit_at_load()
        logger.info(
            "starting",
            metadata: [
                "kafka.group_id": "\(configuration.groupID)", "kafka.topic": "\(configuration.topics.purchases)",
                "ledger": "\(configuration.redactedLedgerURL)", "worker.max_in_flight": "\(configuration.maxInFlight)",
                "librdkafka.version": "\(Librdkafka.versionString)",
                "kafka.group_protocol": "\(configuration.consumerConfiguration.groupProtocolName)",
                "malloc.arena_max": "\(arenaLimit > 0 ? String(arenaLimit) : "unchanged")",
                "foundation.time_zone": "\(namedGMT ? "GMT" : "system")",
            ])
        for warning in configuration.warnings {
            logger.warning("configuration", metadata: ["iap.warning": "\(warning)"])
        }
        // A burst (a backlog, a rebalance, a slow Gamebase) raises the purchases in flight and the heap with them;
        // glibc keeps what they freed inside its heaps, so the resident size stayed at the largest burst of the run.
        // A pass every 30 s gives the free pages back (docs/benchmarks.md, issue #39), on a thread of its own: it
        // blocks for milliseconds, which the cooperative pool's one thread per core must not.
        Thread.detachNewThread {
            while true {
                sleep(30)
                _ = iap_release_free_memory()
            }
        }
        try await WorkerApplication.run(configuration: configuration, logger: logger, signals: signals)
        LogThrottle.shared.flushAll()
        logger.info("stopped")
        LogOutput.standardOutput.flush()
        exitAfterCleanShutdown()
    }
}
