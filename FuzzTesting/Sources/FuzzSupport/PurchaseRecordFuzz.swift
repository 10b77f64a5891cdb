import Foundation
import Fulfilment
import Gamebase
import Logging

/// The purchase record target (docs/fuzzing.md): up to four records, each with any value, key, headers, Kafka
/// timestamp and `provenanceTrusted` flag, go through parsing, the provenance accessors and the whole flow —
/// `PurchaseProcessor.process(_:)` as the engine runs it (retried after a failure, dead-lettered when Gamebase stays
/// unavailable) and `deadLetter(...)` — against a scripted Gamebase, an in-memory ledger and a recording publisher.
public enum PurchaseRecordFuzz {
    static let purchasesTopic = "purchase.completed"
    static let deadLetterTopic = "purchase.completed.dlq"
    static let grantedTopic = "iap.item-granted"
    static let failedTopic = "iap.consume-failed"
    static let workerName = "fuzz-worker"

    /// The worker's provenance headers on a dead-letter record (DESIGN §2), in the order it writes them.
    static let provenanceNames = [
        "iap-original-topic", "iap-original-partition", "iap-original-offset", "iap-original-timestamp", "iap-reason",
        "iap-error", "iap-attempts", "iap-failed-at", "iap-worker",
    ]

    /// Header names a header's first byte picks (a byte past the list reads the name as a field).
    static let headerNames =
        provenanceNames + [
            DeadLetterFactory.omittedValueHeader, "iap-", "iap-extra", "IAP-ATTEMPTS", "content-type", "ce_id",
            "traceparent", "",
        ]

    /// `FUZZ_TRACE=1`: print each record's outcome (to see what an input does: `scripts/fuzz.sh <target> <file>`).
    static let trace = ProcessInfo.processInfo.environment["FUZZ_TRACE"] == "1"

    static let deadLetterReasons: [ConsumeFailureReason] = [.gamebaseUnavailable, .internalError, .malformedMessage]

    /// The dead-letter topic's size limits a configuration byte picks: the flow must move on whatever the topic takes
    /// (a limit below the worker's own headers and a 4 KiB key is not a deployment anyone runs).
    static let deadLetterLimits = [Int.max, 8_192, 6_144, 5_120]

    /// One record of the input and what the run does with it.
    struct Record: Sendable {
        var input: PurchaseInput
        var script: [UInt8]
        var ledgerFault: Int?
        var publishFault: Int?
        /// Also dead-letter the record with this reason and attempt count, as the engine and `reprocess` do.
        var deadLetter: (reason: ConsumeFailureReason, attempts: Int)?
    }

    struct Settings: Sendable {
        var rejectTestPurchases: Bool
        var maxMessageBytes: Int
        var deadLetterLimit: Int
        var now: Date
    }

    /// Runs one input; traps (with a message) when the flow breaks one of its promises.
    public static func run(_ bytes: [UInt8]) {
        var data = FuzzBytes(bytes)
        let configuration = data.byte()
        let settings = Settings(
            rejectTestPurchases: configuration & 1 != 0, maxMessageBytes: configuration & 8 != 0 ? 256 : 65_536,
            deadLetterLimit: deadLetterLimits[Int(configuration >> 1) & 3],
            now: Date(timeIntervalSince1970: Double(data.int64()) / 1000))
        var records: [Record] = []
        var previousValue: [UInt8] = []
        while !data.isAtEnd, records.count < 4 {
            let record = readRecord(&data, number: records.count, previousValue: previousValue)
            previousValue = record.input.value
            records.append(record)
        }
        let inputs = records
        runBlocking {
            var flow = FlowRun(settings)
            for record in inputs { await flow.handle(record) }
            await flow.checkGrants()
        }
    }

    static func readRecord(_ data: inout FuzzBytes, number: Int, previousValue: [UInt8]) -> Record {
        let flags = data.byte()
        let partition = Int32(data.byte() % 4)
        let timestamp = data.int64()
        var value = data.field()
        // A repeat of the previous record's value: a redelivery, or another message for the same purchase.
        if flags & 0x20 != 0 { value = previousValue + value }
        let key = flags & 0x02 != 0 ? data.field() : nil
        var headers: [RecordHeader] = []
        for _ in 0..<(data.byte() % 8) {
            let pick = Int(data.byte())
            let name = pick < headerNames.count ? headerNames[pick] : data.text()
            let hasValue = data.byte() & 1 == 0
            let headerValue = data.field()
            headers.append(RecordHeader(name: name, value: hasValue ? headerValue : nil))
        }
        let faults = data.byte()
        let deadLetterPick = data.byte()
        let deadLetterAttempts = Int(truncatingIfNeeded: data.int64())
        let input = PurchaseInput(
            key: key, value: value, headers: headers,
            source: MessageSource(
                topic: flags & 0x04 != 0 ? deadLetterTopic : purchasesTopic, partition: partition, offset: Int64(number)
            ),
            timestampMilliseconds: flags & 0x10 != 0 ? nil : timestamp, provenanceTrusted: flags & 0x01 != 0)
        return Record(
            input: input, script: data.field(), ledgerFault: faults & 0x0F == 0 ? nil : Int(faults & 0x0F),
            publishFault: faults >> 4 == 0 ? nil : Int(faults >> 4),
            deadLetter: flags & 0x08 == 0
                ? nil : (deadLetterReasons[Int(deadLetterPick) % deadLetterReasons.count], deadLetterAttempts))
    }
}

/// The fakes and the processor of one input, and what the checks remember across its records.
struct FlowRun {
    let settings: PurchaseRecordFuzz.Settings
    /// The memory ledger (InMemoryLedger's), through a wrapper that injects the input's write faults.
    let ledger = FaultyLedger()
    let gamebase: ScriptedGamebase
    let publisher = RecordingPublisher()
    let processor: PurchaseProcessor
    /// `.granted` outcomes per paymentSeq (bytes).
    var grantedOutcomes: [[UInt8]: Int] = [:]
    /// The payload of each item-granted event id: re-sent, it must be the same event.
    var grantedPayloads: [[UInt8]: [UInt8]] = [:]

    init(_ settings: PurchaseRecordFuzz.Settings) {
        self.settings = settings
        gamebase = ScriptedGamebase(ledger: ledger.memory)
        publisher.limit(deadLetterTopic: PurchaseRecordFuzz.deadLetterTopic, maxRecordBytes: settings.deadLetterLimit)
        let noRetryWait = RetryPolicy(maxAttempts: 3, initialBackoff: .zero, maxBackoff: .zero)
        processor = PurchaseProcessor(
            gamebase: gamebase, ledger: ledger, publisher: publisher,
            configuration: FulfilmentConfiguration(
                groupID: "iap-worker", itemGrantedTopic: PurchaseRecordFuzz.grantedTopic,
                consumeFailedTopic: PurchaseRecordFuzz.failedTopic, deadLetterTopic: PurchaseRecordFuzz.deadLetterTopic,
                workerName: PurchaseRecordFuzz.workerName, rejectTestPurchases: settings.rejectTestPurchases,
                maxMessageBytes: settings.maxMessageBytes, verifyRetry: noRetryWait, consumeRetry: noRetryWait),
            logger: Logger(label: "fuzz", factory: { _ in SwiftLogNoOpLogHandler() }),
            clock: FixedClock(now: settings.now))
    }

    /// Runs `body` until it succeeds; only the faults the input injected may make it fail (the engine retries
    /// those). Any other failure means the record never gets a durable outcome: its partition would stall.
    func durably<T>(_ what: String, _ body: () async throws -> T) async -> T {
        for _ in 0..<4 {
            do {
                return try await body()
            } catch is FaultyLedger.InjectedFailure {
                continue
            } catch is RecordingPublisher.InjectedFailure {
                continue
            } catch {
                fuzzFailure("\(what) threw \(error): the record gets no durable outcome and its partition stalls")
            }
        }
        fuzzFailure("\(what) kept failing after the injected faults were spent")
    }

    mutating func handle(_ record: PurchaseRecordFuzz.Record) async {
        let input = record.input
        Self.checkProvenance(input)
        let parsed = processor.parse(input)
        let message = try? parsed.get()
        if let message { Self.checkMessage(message, maxBytes: settings.maxMessageBytes) }
        gamebase.script(
            record.script,
            claim: message.map {
                ScriptedGamebase.Claim(paymentSeq: $0.paymentSeq, userId: $0.userId, token: $0.purchaseToken)
            })
        ledger.failWrite(record.ledgerFault)
        publisher.failPublish(record.publishFault)

        // The dead-letter records of this input, whole and without its value, as the flow would build them.
        let factory = processor.configuration.deadLetters
        let attempts = record.deadLetter?.attempts ?? 1
        let reason = record.deadLetter?.reason ?? .malformedMessage
        let whole = factory.record(
            for: input, reason: reason, error: "fuzz\nsecond line", attempts: attempts, at: settings.now)
        checkDeadLetter(whole, input, reason: reason, attempts: attempts)
        checkDeadLetter(factory.withoutValue(whole), input, reason: reason, attempts: attempts)

        var mark = publisher.count
        let outcome = await durably("process") { try await processor.process(input) }
        if PurchaseRecordFuzz.trace { print("record \(input.source.offset): \(outcome)") }
        await check(outcome, input, message)
        await checkPublished(from: mark, input, message, deadLetter: (.malformedMessage, 1))

        if case .gamebaseUnavailable(let error, let attempts) = outcome {
            // What the engine does when the prober says Gamebase answers: this purchase is the problem.
            mark = publisher.count
            await durably("deadLetter") {
                try await processor.deadLetter(
                    input, reason: .gamebaseUnavailable, error: error.description, attempts: attempts)
            }
            fuzzCheck(
                publisher.records[mark...].contains { $0.topic == PurchaseRecordFuzz.deadLetterTopic },
                "no dead-letter record")
            await checkPublished(from: mark, input, message, deadLetter: (.gamebaseUnavailable, attempts))
        }
        if let deadLetter = record.deadLetter {
            mark = publisher.count
            await durably("deadLetter") {
                try await processor.deadLetter(
                    input, reason: deadLetter.reason, error: "fuzz\nsecond line", attempts: deadLetter.attempts)
            }
            fuzzCheck(
                publisher.records[mark...].contains { $0.topic == PurchaseRecordFuzz.deadLetterTopic },
                "no dead-letter record")
            await checkPublished(from: mark, input, message, deadLetter: deadLetter)
        }
    }
}
