import Foundation
import Fulfilment
import Gamebase
import Logging

/// `iap-worker reprocess`: re-drives dead-lettered records through the flow, once each, and ends.
///
/// It reads the dead-letter topic up to its end when the run started (``DeadLetterSource``), so a record that fails
/// again — which goes back to the same topic with its attempt count raised — is not read again in the same run. Each
/// record's offset is stored only once its outcome is durable. It stops early, committing what is done, when Gamebase
/// refuses the configuration or does not answer at all: re-driving into an outage would only dead-letter everything
/// again.
public struct Reprocessor: Sendable {
    public struct Options: Sendable {
        public var reason: String?
        public var limit: Int?
        public var dryRun: Bool
        /// Told what a dry run would re-drive, one line per record, as it reads them.
        public var announce: @Sendable (String) -> Void

        public init(
            reason: String? = nil, limit: Int? = nil, dryRun: Bool = false,
            announce: @escaping @Sendable (String) -> Void = { _ in }
        ) {
            self.reason = reason
            self.limit = limit
            self.dryRun = dryRun
            self.announce = announce
        }
    }

    /// What a run did.
    public struct Report: Sendable {
        /// Records handled, by the reason they had been dead-lettered for, then by what happened now.
        public var outcomes: [String: [String: Int]] = [:]
        /// Records passed over by the `--reason` filter.
        public var skipped = 0
        /// End offsets taken at the start, by partition.
        public var endOffsets: [Int32: Int64] = [:]
        /// Why the run ended before the end offsets, when it did.
        public var stoppedEarly: String?
        /// The run stopped on a configuration failure (the command exits non-zero).
        public var failed = false

        public var handled: Int { outcomes.values.reduce(0) { $0 + $1.values.reduce(0, +) } }

        mutating func count(_ reason: String, _ outcome: String) {
            outcomes[reason, default: [:]][outcome, default: 0] += 1
        }
    }

    let source: any DeadLetterSource
    let processor: PurchaseProcessor
    let admin: any AdminLedger
    let clock: any WorkerClock
    let logger: Logger

    /// - Parameters:
    ///   - source: the dead-letter topic, read with a consumer group of the run's own.
    ///   - processor: the flow the records go through (its publisher writes to the worker's topics).
    ///   - admin: where what became of each dead letter is recorded (for `find`).
    public init(
        source: any DeadLetterSource, processor: PurchaseProcessor, admin: any AdminLedger,
        clock: any WorkerClock = .system, logger: Logger
    ) {
        self.source = source
        self.processor = processor
        self.admin = admin
        self.clock = clock
        self.logger = logger
    }

    /// The consumer group a run with this filter reads with: each filter keeps its own progress.
    public static func groupID(base: String, reason: String?) -> String {
        base + ".reprocess" + (reason.map { ".\($0)" } ?? "")
    }

    public func run(_ options: Options) async throws -> Report {
        var report = Report()
        do {
            try await read(options: options, report: &report)
        } catch let stopped as DeadLetterSourceStopped {
            report.stoppedEarly = stopped.reason
        } catch {
            report.endOffsets = source.endOffsets
            await source.close(commit: !options.dryRun)
            throw error
        }
        report.endOffsets = source.endOffsets
        await source.close(commit: !options.dryRun)
        return report
    }

    private func read(options: Options, report: inout Report) async throws {
        // Where the run ends: the end offsets now. What is added later (records that fail again) is the next run's.
        report.endOffsets = try await source.open()
        var handled = 0
        while true {
            if let limit = options.limit, handled >= limit {
                if source.hasMore { report.stoppedEarly = "--limit \(limit) reached" }
                return
            }
            guard let record = try await source.next() else { return }
            let input = record.input
            let reason = input.deadLetterReason ?? "unknown"
            if let wanted = options.reason, reason != wanted {
                report.skipped += 1
                if !options.dryRun { try source.markDone(record) }
                continue
            }
            handled += 1
            if options.dryRun {
                let seq = (try? processor.parse(input).get().paymentSeq) ?? "(malformed)"
                let origin =
                    input.originalSource.map { "\($0.topic)[\($0.partition)]@\($0.offset)" } ?? "unknown origin"
                options.announce(
                    "would re-drive \(seq) from \(origin), dead-lettered for \(reason), attempts \(input.previousAttempts)"
                )
                report.count(reason, "would_redrive")
                continue
            }
            guard let outcome = try await redrive(input) else {
                report.count(reason, "stopped")
                report.failed = true
                report.stoppedEarly = "Gamebase rejects the configuration"
                return
            }
            report.count(reason, outcome)
            if outcome == "gamebase_down" {
                report.count(reason, "stopped")
                report.stoppedEarly = "Gamebase does not answer; nothing more is re-driven until it does"
                return
            }
            await recordOutcome(outcome, of: input.source)
            try source.markDone(record)
        }
    }

    /// Tells the ledger what became of the dead letter (shown by `iap-worker find`); a ledger that refuses it costs
    /// the lookup, not the run.
    private func recordOutcome(_ outcome: String, of source: MessageSource) async {
        let location = RecordLocation(topic: source.topic, partition: source.partition, offset: source.offset)
        let (admin, now) = (admin, clock.now)
        do {
            try await processor.ledger.deadline.run("reprocess outcome") {
                try await admin.recordReprocessOutcome(deadLetter: location, outcome: outcome, at: now)
            }
        } catch {
            logger.warning(
                "reprocess outcome not recorded in the ledger",
                metadata: ["kafka.offset": "\(source.offset)", "iap.error": "\(error)"])
        }
    }

    /// Runs one record through the flow; returns what happened, or `nil` when Gamebase refuses the configuration
    /// (nothing is committed for it). `"gamebase_down"` means the record was not handled either.
    private func redrive(_ input: PurchaseInput) async throws -> String? {
        let parsed = processor.parse(input)
        if case .failure(let malformed) = parsed {
            // Still malformed: back to the dead-letter topic for audit, attempts raised; no second consume-failed
            // event (downstream heard of it when it was first dead-lettered).
            try await processor.publishDeadLetter(
                processor.configuration.deadLetters.record(
                    for: input, reason: .malformedMessage, error: malformed.problem, attempts: 1, at: clock.now),
                for: input)
            return "malformed_again"
        }
        switch try await processor.process(input, parsed: parsed) {
        case .gamebaseUnavailable(let error, let attempts):
            guard case .answers = await processor.gamebase.probe(transactionID: GamebaseTransactionID()) else {
                return "gamebase_down"
            }
            try await processor.deadLetter(
                input, reason: .gamebaseUnavailable, error: error.description, attempts: attempts)
            return "dead_lettered_again"
        case .stop:
            return nil
        case let outcome:
            return outcome.metricLabel
        }
    }
}
