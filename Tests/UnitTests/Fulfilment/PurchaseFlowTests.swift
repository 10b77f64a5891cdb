import Foundation
import Fulfilment
import Gamebase
import IAPTestSupport
import Synchronization
import Testing

@Suite("The consume flow", .timeLimit(.minutes(2)))
struct PurchaseFlowTests {
    @Test func aValidPurchaseIsGrantedAnnouncedAndConsumed() async throws {
        try await FlowHarness.run { (h: FlowHarness) async throws in
            h.payment("1001")
            let outcome = try await h.processor.process(
                FlowHarness.input(FlowHarness.message("1001", product: "something_else")))
            #expect(outcome == PurchaseOutcome.granted(paymentSeq: "1001", consumePending: false))
            let grant = try #require(try await h.ledger.grant(paymentSeq: "1001"))
            #expect(grant.state == .consumed)
            #expect(grant.gamebaseProductId == "gem_pack_100", "the product granted is Gamebase's, not the message's")
            #expect(grant.eventPublishedAt != nil)
            #expect(h.gamebase.successfulConsumes("1001") == 1)

            let events = h.publisher.events(on: h.topics.granted)
            #expect(events.count == 1)
            let event = try #require(events.first)
            #expect(event["id"] as? String == "1001:item-granted")
            #expect(event["specversion"] as? String == "1.0")
            #expect(event["type"] as? String == "gamebase.iap.item.granted.v1")
            #expect(event["source"] as? String == "/iap-worker/iap-worker")
            #expect(event["subject"] as? String == "1001")
            #expect(event["datacontenttype"] as? String == "application/json")
            let data = try #require(event["data"] as? [String: Any])
            #expect(data["userId"] as? String == "owner")
            #expect(data["gamebaseProductId"] as? String == "gem_pack_100")
            #expect((data["price"] as? NSNumber)?.doubleValue == 1200.5)
            #expect(data["isTestPurchase"] as? Bool == false)
            #expect(data["grantedAt"] is String)
            let record = try #require(h.publisher.records(on: h.topics.granted).first)
            #expect(record.key == Array("owner".utf8))
            #expect(
                record.headers.contains {
                    $0.name == "content-type" && $0.stringValue == "application/cloudevents+json"
                })
            #expect(h.publisher.records(on: h.topics.failed).isEmpty)
        }
    }

    @Test func aDuplicateOfAGrantPublishesNothingNew() async throws {
        try await FlowHarness.run { (h: FlowHarness) async throws in
            h.payment("1002")
            _ = try await h.process("1002")
            let calls = (h.gamebase.verifyCalls, h.gamebase.consumeCalls, h.publisher.records.count)
            #expect((try await h.process("1002", offset: 9)) == PurchaseOutcome.duplicate(paymentSeq: "1002"))
            #expect((h.gamebase.verifyCalls, h.gamebase.consumeCalls, h.publisher.records.count) == calls)
        }
    }

    @Test func aDuplicateOfARejectionPublishesNothingNew() async throws {
        try await FlowHarness.run { (h: FlowHarness) async throws in
            #expect(
                (try await h.process("1003")) == PurchaseOutcome.rejected(paymentSeq: "1003", reason: .invalidPurchase))
            let published = h.publisher.records.count
            #expect((try await h.process("1003")) == PurchaseOutcome.duplicate(paymentSeq: "1003"))
            #expect(h.publisher.records.count == published)
            #expect(h.gamebase.verifyCalls == 1)
        }
    }

    @Test func eachFailedCheckIsRejectedWithItsReason() async throws {
        try await FlowHarness.run(rejectTestPurchases: true) { (h: FlowHarness) async throws in
            h.payment("other")  // the token "tok-other" belongs to payment "other"
            h.payment("2001", user: "owner")
            h.payment("2002", type: GamebaseProductType.autoRenewable)
            h.payment("2003", consumed: true)
            h.payment("2004", test: true)
            let cases: [(String, String, String, ConsumeFailureReason)] = [
                ("2000", "owner", "tok-unknown", .invalidPurchase),
                ("2005", "owner", "tok-other", .paymentMismatch),
                ("2001", "thief", "tok-2001", .userMismatch),
                ("2002", "owner", "tok-2002", .notConsumable),
                ("2003", "owner", "tok-2003", .consumedWithoutGrant),
                ("2004", "owner", "tok-2004", .testPurchase),
            ]
            for (seq, user, token, reason) in cases {
                #expect(
                    (try await h.process(seq, user: user, token: token))
                        == PurchaseOutcome.rejected(paymentSeq: seq, reason: reason))
            }
            let events = h.publisher.events(on: h.topics.failed)
            #expect(events.count == cases.count)
            #expect(
                Set(events.compactMap { ($0["data"] as? [String: Any])?["reason"] as? String })
                    == Set(cases.map(\.3.rawValue)))
            for event in events {
                #expect(event["type"] as? String == "gamebase.iap.consume.failed.v1")
                #expect((event["id"] as? String)?.contains(":consume-failed:") == true)
                #expect((event["data"] as? [String: Any])?["retryable"] as? Bool == false)
            }
            let invalid = try #require(
                events.first { ($0["data"] as? [String: Any])?["reason"] as? String == "invalid_purchase" })
            #expect((invalid["data"] as? [String: Any])?["resultCode"] as? Int == 1100)
            // Nothing was granted or consumed.
            #expect(try await h.ledger.stats().granted == 0)
            #expect(h.gamebase.successfulConsumes("2001") == 0)
            #expect(h.gamebase.successfulConsumes("other") == 0)
        }
    }

    @Test(arguments: LedgerBackend.allCases)
    func stolenAndForgedClaimsNeverBlockTheOwner(backend: LedgerBackend) async throws {
        try await FlowHarness.run(backend) { (h: FlowHarness) async throws in
            h.payment("3001", user: "owner")
            h.payment("9999", user: "thief", token: "thief-own-token")
            #expect(
                (try await h.process("3001", user: "thief"))
                    == PurchaseOutcome.rejected(paymentSeq: "3001", reason: .userMismatch))
            #expect(
                (try await h.process("3001", user: "owner", token: "forged"))
                    == PurchaseOutcome.rejected(paymentSeq: "3001", reason: .invalidPurchase))
            #expect(
                (try await h.process("3001", user: "thief", token: "thief-own-token"))
                    == PurchaseOutcome.rejected(paymentSeq: "3001", reason: .paymentMismatch))
            #expect(
                (try await h.process("3001", user: "owner"))
                    == PurchaseOutcome.granted(paymentSeq: "3001", consumePending: false))
            #expect(try await h.ledger.grant(paymentSeq: "3001")?.userId == "owner")
            // After the grant, the thief's repeat is a duplicate, and the owner's is too.
            #expect((try await h.process("3001", user: "thief")) == PurchaseOutcome.duplicate(paymentSeq: "3001"))
            #expect((try await h.process("3001", user: "owner")) == PurchaseOutcome.duplicate(paymentSeq: "3001"))
            #expect(h.gamebase.successfulConsumes("3001") == 1)
            #expect(h.gamebase.successfulConsumes("9999") == 0)
        }
    }

    @Test func transientGamebaseFailuresDecideNothing() async throws {
        try await FlowHarness.run { (h: FlowHarness) async throws in
            h.payment("4001")
            h.gamebase.failVerify(Array(repeating: FakeGamebase.error(.unknownError), count: 3))
            let outcome = try await h.process("4001")
            guard case .gamebaseUnavailable(let error, let attempts) = outcome else {
                Issue.record("expected gamebaseUnavailable, got \(outcome)")
                return
            }
            #expect(error.kind == .transient)
            #expect(attempts == 3)
            #expect(
                try await h.ledger.stats()
                    == LedgerStats(granted: 0, consumed: 0, rejections: [:], unpublishedEvents: 0))
            #expect(h.publisher.records.isEmpty)
            // Fewer failures than attempts: retried within the message.
            h.gamebase.failVerify([FakeGamebase.error(.internalSystemError), FakeGamebase.timeout])
            #expect((try await h.process("4001")) == PurchaseOutcome.granted(paymentSeq: "4001", consumePending: false))
        }
    }

    @Test func aVerifyCutShortByCancellationDecidesNothingAndPublishesNothing() async throws {
        try await FlowHarness.run { (h: FlowHarness) async throws in
            h.payment("4101")
            h.gamebase.state.withLock { $0.verifyHangsUntilCancelled = true }
            let flow = Task { try await h.process("4101") }
            while h.gamebase.verifyCalls == 0 { try await Task.sleep(for: .milliseconds(5)) }
            flow.cancel()
            // Shutdown cut the call short: that is no transient failure of Gamebase (which the engine could
            // dead-letter), and no outcome at all.
            await #expect(throws: CancellationError.self) { try await flow.value }
            #expect(h.publisher.records.isEmpty)
            #expect(
                try await h.ledger.stats()
                    == LedgerStats(granted: 0, consumed: 0, rejections: [:], unpublishedEvents: 0))
        }
    }

    @Test func aConfigurationFailureStopsWithoutRecordingAnything() async throws {
        try await FlowHarness.run { (h: FlowHarness) async throws in
            h.payment("5001")
            h.gamebase.failVerify([FakeGamebase.error(.invalidSecretKey)])
            let outcome = try await h.process("5001")
            #expect(outcome == PurchaseOutcome.stop(FakeGamebase.error(.invalidSecretKey), durable: false))
            #expect(h.gamebase.verifyCalls == 1, "a configuration failure is not retried")
            #expect(
                try await h.ledger.stats()
                    == LedgerStats(granted: 0, consumed: 0, rejections: [:], unpublishedEvents: 0))
            #expect(h.publisher.records.isEmpty)
        }
    }

    @Test func consumeFailingAfterTheGrantNeverUndoesIt() async throws {
        try await FlowHarness.run { (h: FlowHarness) async throws in
            h.payment("6001")
            h.gamebase.failConsume(Array(repeating: FakeGamebase.timeout, count: 3))
            #expect((try await h.process("6001")) == PurchaseOutcome.granted(paymentSeq: "6001", consumePending: true))
            let grant = try #require(try await h.ledger.grant(paymentSeq: "6001"))
            #expect(grant.state == .granted)
            #expect(grant.consumeAttempts == 1)
            #expect(h.publisher.events(on: h.topics.granted).count == 1)
            // Redelivery (or the sweeper) finishes it.
            #expect((try await h.process("6001")) == PurchaseOutcome.duplicate(paymentSeq: "6001"))
            #expect(try await h.ledger.grant(paymentSeq: "6001")?.state == .consumed)
            #expect(h.gamebase.successfulConsumes("6001") == 1)
            #expect(h.publisher.events(on: h.topics.granted).count == 1)
        }
    }

    @Test func alreadyConsumedAtGamebaseCountsAsConsumed() async throws {
        try await FlowHarness.run { (h: FlowHarness) async throws in
            h.payment("7001")
            h.gamebase.state.withLock { $0.consumeAppliesThenFails = FakeGamebase.timeout }
            // The first consume applies but its answer is lost; the retry gets 5018.
            #expect((try await h.process("7001")) == PurchaseOutcome.granted(paymentSeq: "7001", consumePending: false))
            let grant = try #require(try await h.ledger.grant(paymentSeq: "7001"))
            #expect(grant.state == .consumed)
            #expect(grant.lastResultCode == 5018)
            #expect(h.gamebase.successfulConsumes("7001") == 1)
        }
    }

    @Test func aConsumeRejectedByGamebaseIsAnnouncedAndTheGrantKept() async throws {
        try await FlowHarness.run { (h: FlowHarness) async throws in
            h.payment("8001")
            h.gamebase.failConsume([FakeGamebase.error(.consumeFailed, api: "consume")])
            #expect((try await h.process("8001")) == PurchaseOutcome.granted(paymentSeq: "8001", consumePending: true))
            #expect(try await h.ledger.grant(paymentSeq: "8001")?.state == .granted)
            let failed = h.publisher.events(on: h.topics.failed)
            #expect(failed.count == 1)
            #expect((failed.first?["data"] as? [String: Any])?["reason"] as? String == "consume_rejected")
            #expect(failed.first?["id"] as? String == "8001:consume-failed:consume_rejected")
        }
    }

    @Test func aMalformedMessageIsAnnouncedAndDeadLettered() async throws {
        try await FlowHarness.run { (h: FlowHarness) async throws in
            let value = Array(#"{"paymentSeq":"123","userId":42}"#.utf8)
            let outcome = try await h.processor.process(FlowHarness.input(value, offset: 17, partition: 2))
            #expect(outcome == PurchaseOutcome.malformed(problem: "userId is not a string"))
            let event = try #require(h.publisher.events(on: h.topics.failed).first)
            #expect(event["id"] as? String == "purchase.completed/2/17:consume-failed")
            #expect((event["data"] as? [String: Any])?["reason"] as? String == "malformed_message")
            #expect((event["data"] as? [String: Any])?["paymentSeq"] as? String == "123")
            let dead = try #require(h.publisher.records(on: h.topics.dlq).first)
            #expect(dead.value == value)
            #expect(dead.key == Array("k".utf8))
            let headers = Dictionary(dead.headers.map { ($0.name, $0.stringValue ?? "") }, uniquingKeysWith: { $1 })
            #expect(headers["trace"] == "abc", "original headers are kept")
            #expect(headers["iap-original-topic"] == "purchase.completed")
            #expect(headers["iap-original-partition"] == "2")
            #expect(headers["iap-original-offset"] == "17")
            #expect(headers["iap-original-timestamp"] == "1700000000000")
            #expect(headers["iap-reason"] == "malformed_message")
            #expect(headers["iap-error"] == "userId is not a string")
            #expect(headers["iap-attempts"] == "1")
            #expect(headers["iap-worker"] == "test-worker")
            #expect(headers["iap-failed-at"]?.isEmpty == false)
        }
    }

    @Test func deadLetteringAnUnavailablePurchaseKeepsItsProvenanceAndCountsAttempts() async throws {
        try await FlowHarness.run { (h: FlowHarness) async throws in
            let input = FlowHarness.input(FlowHarness.message("1234"), offset: 5)
            try await h.processor.deadLetter(
                input, reason: .gamebaseUnavailable, error: "Gamebase timed out\nagain", attempts: 3)
            let dead = try #require(h.publisher.records(on: h.topics.dlq).first)
            let headers = Dictionary(dead.headers.map { ($0.name, $0.stringValue ?? "") }, uniquingKeysWith: { $1 })
            #expect(headers["iap-reason"] == "gamebase_unavailable")
            #expect(headers["iap-attempts"] == "3")
            #expect(headers["iap-error"] == "Gamebase timed out again")
            let event = try #require(h.publisher.events(on: h.topics.failed).first)
            #expect((event["data"] as? [String: Any])?["retryable"] as? Bool == true)

            // Re-driven from the dead-letter topic (whose provenance headers are the worker's own, so believed)
            // and failing again: provenance stays, attempts add up.
            let redriven = PurchaseInput(
                key: dead.key, value: dead.value, headers: dead.headers,
                source: MessageSource(topic: "purchase.completed.dlq", partition: 0, offset: 99),
                provenanceTrusted: true)
            try await h.processor.deadLetter(redriven, reason: .gamebaseUnavailable, error: "still down", attempts: 2)
            let again = try #require(h.publisher.records(on: h.topics.dlq).last)
            let againHeaders = Dictionary(
                again.headers.map { ($0.name, $0.stringValue ?? "") }, uniquingKeysWith: { $1 })
            #expect(againHeaders["iap-attempts"] == "5")
            #expect(againHeaders["iap-original-topic"] == "purchase.completed")
            #expect(againHeaders["iap-original-offset"] == "5")
            #expect(again.headers.filter { $0.name == "iap-reason" }.count == 1)
        }
    }

    @Test func aPublisherFailureLeavesTheMessageUnfinishedButNothingLost() async throws {
        try await FlowHarness.run { (h: FlowHarness) async throws in
            h.payment("9101")
            h.publisher.failNext(1)
            await #expect(throws: RecordingPublisher.PublishFailed.self) { try await h.process("9101") }
            // The grant is durable; redelivery publishes its event and consumes.
            #expect((try await h.process("9101")) == PurchaseOutcome.duplicate(paymentSeq: "9101"))
            #expect(h.publisher.events(on: h.topics.granted).map { $0["id"] as? String } == ["9101:item-granted"])
            #expect(try await h.ledger.grant(paymentSeq: "9101")?.state == .consumed)
        }
    }
}
