import Foundation
import Fulfilment
import Gamebase
import IAPTestSupport
import InMemoryLedger
import Synchronization
import Testing

@testable import Engine

/// `reprocess` over a memory dead-letter topic: each record once, what is finished committed, early stops that keep
/// the rest for the next run.
@Suite("Reprocess over a memory dead-letter topic", .timeLimit(.minutes(1)))
struct ReprocessorTests {
    /// A purchase dead-lettered for `reason`, its payment known to the fake Gamebase.
    static func deadLetter(
        _ seq: String, reason: ConsumeFailureReason = .gamebaseUnavailable, in harness: EngineHarness,
        to source: MemoryDeadLetterSource
    ) {
        let input = PurchaseInput(
            key: Array("owner".utf8), value: harness.payment(seq),
            source: MessageSource(topic: EngineHarness.topic, partition: 0, offset: 7), timestampMilliseconds: 1)
        source.append(
            harness.services.processor.configuration.deadLetters.record(
                for: input, reason: reason, error: "no answer", attempts: 3, at: harness.clock.now))
    }

    static func reprocessor(_ harness: EngineHarness, _ source: MemoryDeadLetterSource) -> Reprocessor {
        Reprocessor(
            source: source, processor: harness.services.processor, admin: harness.ledger, clock: harness.clock,
            logger: TestDatabases.quietLogger)
    }

    @Test func aRunReDrivesEachDeadLetterOnceAndCommitsWhatItFinished() async throws {
        let harness = EngineHarness()
        let source = MemoryDeadLetterSource()
        for seq in ["d1", "d2"] { Self.deadLetter(seq, in: harness, to: source) }
        let report = try await Self.reprocessor(harness, source).run(.init())
        #expect(report.handled == 2 && report.stoppedEarly == nil && !report.failed)
        for seq in ["d1", "d2"] { #expect(try await harness.ledger.grant(paymentSeq: seq)?.state == .consumed) }
        #expect(source.committedOffset == 2 && source.closes == [true])
        // The next run starts after them: nothing is re-driven twice.
        #expect(try await Self.reprocessor(harness, source).run(.init()).handled == 0)
        #expect(harness.gamebase.successfulConsumes("d1") == 1)
    }

    @Test func aDryRunAnnouncesEachRecordAndChangesAndCommitsNothing() async throws {
        let harness = EngineHarness()
        let source = MemoryDeadLetterSource()
        for seq in ["d1", "d2"] { Self.deadLetter(seq, in: harness, to: source) }
        let lines = LineRecorder()
        let report = try await Self.reprocessor(harness, source).run(.init(dryRun: true, announce: lines.append))
        #expect(report.outcomes == ["gamebase_unavailable": ["would_redrive": 2]])
        #expect(lines.lines.count == 2 && lines.lines[0].hasPrefix("would re-drive d1 from purchase.completed[0]@7"))
        #expect(try await harness.ledger.grant(paymentSeq: "d1") == nil)
        #expect(harness.gamebase.verifyCalls == 0)
        #expect(source.committedOffset == 0 && source.closes == [false])
    }

    @Test func theReasonFilterSkipsOtherReasonsAndStillMovesPastThem() async throws {
        let harness = EngineHarness()
        let source = MemoryDeadLetterSource()
        Self.deadLetter("d1", reason: .internalError, in: harness, to: source)
        Self.deadLetter("d2", in: harness, to: source)
        let report = try await Self.reprocessor(harness, source).run(.init(reason: "gamebase_unavailable"))
        #expect(report.skipped == 1 && report.handled == 1)
        #expect(try await harness.ledger.grant(paymentSeq: "d1") == nil)
        #expect(try await harness.ledger.grant(paymentSeq: "d2")?.state == .consumed)
        #expect(source.committedOffset == 2)
    }

    @Test func aLimitStopsEarlyOnlyWhileRecordsRemain() async throws {
        let harness = EngineHarness()
        let source = MemoryDeadLetterSource()
        for seq in ["d1", "d2"] { Self.deadLetter(seq, in: harness, to: source) }
        let first = try await Self.reprocessor(harness, source).run(.init(limit: 1))
        #expect(first.handled == 1 && first.stoppedEarly == "--limit 1 reached")
        #expect(source.committedOffset == 1)
        let second = try await Self.reprocessor(harness, source).run(.init(limit: 1))
        #expect(second.handled == 1 && second.stoppedEarly == nil, "the limit met exactly at the end is no early stop")
        #expect(source.committedOffset == 2)
    }

    @Test func aConfigurationGamebaseRejectsStopsTheRunBeforeTheRecord() async throws {
        let harness = EngineHarness()
        let source = MemoryDeadLetterSource()
        for seq in ["d1", "d2"] { Self.deadLetter(seq, in: harness, to: source) }
        harness.gamebase.failVerify([FakeGamebase.error(.invalidSecretKey), FakeGamebase.error(.invalidSecretKey)])
        let report = try await Self.reprocessor(harness, source).run(.init())
        #expect(report.failed && report.stoppedEarly == "Gamebase rejects the configuration")
        #expect(source.committedOffset == 0, "the refused record is the next run's")
        #expect(try await harness.ledger.grant(paymentSeq: "d2") == nil)
    }

    @Test func aSourceThatStopsEndsTheRunCommittingWhatWasFinished() async throws {
        let harness = EngineHarness()
        let source = MemoryDeadLetterSource()
        for seq in ["d1", "d2"] { Self.deadLetter(seq, in: harness, to: source) }
        source.stop(at: 1)
        let report = try await Self.reprocessor(harness, source).run(.init())
        #expect(report.handled == 1 && report.stoppedEarly == "another run reads the partition")
        #expect(source.committedOffset == 1 && source.closes == [true])
    }
}

/// Collects the lines a dry run announces.
final class LineRecorder: Sendable {
    private let state = Mutex<[String]>([])
    var lines: [String] { state.withLock { $0 } }
    @Sendable func append(_ line: String) { state.withLock { $0.append(line) } }
}
