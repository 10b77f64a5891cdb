import Foundation
import Fulfilment
import IAPTestSupport
import Ledger
import Lookup
import Testing

@Suite("The ledger's read port for people, on SQLite, PostgreSQL and memory", .timeLimit(.minutes(5)))
struct PurchaseHistoryTests {
    static func reader(_ store: any TestLedger) throws -> any HistoryLedger {
        store
    }

    @Test(arguments: LedgerBackend.allCases)
    func aGrantsHistoryHoldsItsMessageDuplicatesConsumeAttemptsAndEvent(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            var grant = LedgerStoreTests.grant("h1", user: "u1", at: Date(epochMilliseconds: 1_700_000_000_000))
            grant.messageTimestampMilliseconds = 1_699_999_999_000
            _ = try await store.insertGrant(grant, event: LedgerStoreTests.event("h1:item-granted", seq: "h1"))
            _ = try await store.recordConsumes([
                ConsumeRecord(
                    paymentSeq: "h1", consumed: false, resultCode: 9999, at: Date(), publishedEventID: "h1:item-granted"
                )
            ])
            try await store.recordConsumeFailure(paymentSeq: "h1", resultCode: nil)
            #expect(
                try await store.markConsumed(
                    paymentSeq: "h1", resultCode: 0, at: Date(epochMilliseconds: 1_700_000_005_000)))
            try await store.recordDuplicates([DuplicateNote(paymentSeq: "h1"), DuplicateNote(paymentSeq: "h1")])
            try await store.recordDuplicates([DuplicateNote(paymentSeq: "h1")])

            let history = try await Self.reader(store).history(paymentSeq: "h1")
            #expect(history.grant?.messageTimestampMilliseconds == 1_699_999_999_000)
            #expect(history.grantDuplicates == 3)
            // The failed attempts are kept; the successful one is the grant row's, and the timeline shows all three.
            #expect(history.consumeAttempts.map(\.attempt) == [1, 2])
            #expect(history.consumeAttempts.map(\.resultCode) == [9999, nil])
            #expect(history.grant?.consumeAttempts == 3)
            let consumes = PurchaseTimeline(history).entries.filter { $0.kind == .consume }
            #expect(consumes.map { $0.fields["attempt"] } == ["1", "2", "3"])
            #expect(consumes.map { $0.fields["consumed"] } == ["false", "false", "true"])
            #expect(consumes.last?.summary == "Consume #3 succeeded (resultCode 0)")
            #expect(history.events.map(\.id) == ["h1:item-granted"])
            #expect(history.events.first?.publishedAt != nil)
        }
    }

    @Test(arguments: LedgerBackend.allCases)
    func consumeAttemptsAreKeptBoundedTheLatestOnes(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            _ = try await store.insertGrant(
                LedgerStoreTests.grant("b1"), event: LedgerStoreTests.event("b1:item-granted", seq: "b1"))
            for code in 1...(ConsumeAttempt.kept + 8) {
                try await store.recordConsumeFailure(paymentSeq: "b1", resultCode: code)
            }
            let attempts = try await Self.reader(store).history(paymentSeq: "b1").consumeAttempts
            #expect(attempts.count == ConsumeAttempt.kept)
            #expect(attempts.first?.attempt == 9)
            #expect(attempts.last?.attempt == ConsumeAttempt.kept + 8)
            #expect(attempts.map(\.resultCode) == Array(9...(ConsumeAttempt.kept + 8)).map { Optional($0) })
        }
    }

    @Test(arguments: LedgerBackend.allCases)
    func rejectionsKeepTheVerdictAndTheirDuplicatesAndAreFoundByPaymentIdAndUser(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            let key = RejectionKey(paymentSeq: "r1", userId: "owner", tokenHash: String(repeating: "ab", count: 32))
            let rejection = RejectionRecord(
                key: key, reason: "consumed_without_grant", detail: "consumed at Gamebase",
                eventID: "r1:consume-failed:x",
                rejectedAt: Date(epochMilliseconds: 1_700_000_000_000),
                source: MessageSource(topic: "purchase.completed", partition: 1, offset: 9),
                messageTimestampMilliseconds: 1_700_000_000_000 - 50,
                verdict: PaymentVerdict(
                    paymentId: "GPA.r1", gamebaseProductId: "gems", marketId: "GG", price: "1.99", currency: "USD"))
            #expect(
                try await store.insertRejection(
                    rejection, event: LedgerStoreTests.event("r1:consume-failed:x", seq: "r1")))
            try await store.recordDuplicates([DuplicateNote(paymentSeq: "r1", rejection: key)])
            let reader = try Self.reader(store)
            let history = try await reader.history(paymentSeq: "r1")
            #expect(history.rejections.map(\.duplicates) == [1])
            #expect(history.rejections.first?.record.verdict?.paymentId == "GPA.r1")
            #expect(history.rejections.first?.record.messageTimestampMilliseconds == Int64(1_699_999_999_950))
            #expect(try await reader.paymentSeqs(paymentId: "GPA.r1", limit: 10) == ["r1"])
            #expect(try await reader.purchases(userId: "owner", before: nil, limit: 10).map(\.paymentSeq) == ["r1"])
            #expect(try await reader.paymentSeqs(paymentId: "GPA.nothing", limit: 10).isEmpty)
        }
    }

    @Test(arguments: LedgerBackend.allCases)
    func deadLettersAreRecordedFoundByTheirMessageAndMarkedReprocessed(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            let original = MessageSource(topic: "purchase.completed", partition: 2, offset: 40)
            let entry = DeadLetterEntry(
                paymentSeq: "d1", userId: "u4", tokenHash: String(repeating: "cd", count: 32),
                reason: "gamebase_unavailable",
                error: "Gamebase timed out", attempts: 6, deadLetterTopic: "purchase.completed.dlq",
                deadLetterPartition: 0,
                deadLetterOffset: 12, original: original, originalTimestampMilliseconds: 1_700_000_000_000,
                failedAt: Date(epochMilliseconds: 1_700_000_001_000), valueBytes: 120)
            try await store.recordDeadLetter(entry)
            try await store.recordReprocessOutcome(
                deadLetter: RecordLocation(topic: "purchase.completed.dlq", partition: 0, offset: 12),
                outcome: "granted",
                at: Date(epochMilliseconds: 1_700_000_002_000))
            let reader = try Self.reader(store)
            let found = try await reader.history(paymentSeq: "d1").deadLetters
            #expect(found.count == 1)
            #expect(found.first?.reprocessOutcome == "granted")
            #expect(found.first?.location == RecordLocation(topic: "purchase.completed.dlq", partition: 0, offset: 12))
            #expect(try await reader.deadLetters(original: original).map(\.paymentSeq) == ["d1"])
            #expect(try await reader.deadLetters(reason: "gamebase_unavailable", before: nil, limit: 5).count == 1)
            #expect(try await reader.deadLetters(reason: "malformed_message", before: nil, limit: 5).isEmpty)
            #expect(try await reader.purchases(userId: "u4", before: nil, limit: 5).map(\.paymentSeq) == ["d1"])
        }
    }

    @Test(arguments: LedgerBackend.allCases)
    func aUsersPurchasesComeNewestFirstPageByPage(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            for index in 0..<5 {
                let seq = "p\(index)"
                _ = try await store.insertGrant(
                    LedgerStoreTests.grant(
                        seq, user: "pager", at: Date(epochMilliseconds: 1_700_000_000_000 + Int64(index) * 1_000)),
                    event: LedgerStoreTests.event("\(seq):item-granted", seq: seq))
            }
            let reader = try Self.reader(store)
            let first = try await reader.purchases(userId: "pager", before: nil, limit: 2)
            #expect(first.map(\.paymentSeq) == ["p4", "p3"])
            let second = try await reader.purchases(userId: "pager", before: first.last?.cursor, limit: 2)
            #expect(second.map(\.paymentSeq) == ["p2", "p1"])
            let third = try await reader.purchases(userId: "pager", before: second.last?.cursor, limit: 2)
            #expect(third.map(\.paymentSeq) == ["p0"])
        }
    }

    /// Purchases that first appeared in one millisecond are all paged through, each once, newest first and then by
    /// paymentSeq (found in review: the next page asked for what appeared strictly before the last row's time, so
    /// the rest of that millisecond was skipped at every page boundary).
    @Test(arguments: LedgerBackend.allCases)
    func purchasesOfOneMillisecondArePagedThroughNoneSkipped(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            let at = Date(epochMilliseconds: 1_700_000_000_000)
            for seq in ["s3", "s0", "s4", "s1"] {
                _ = try await store.insertGrant(
                    LedgerStoreTests.grant(seq, user: "pager", at: at),
                    event: LedgerStoreTests.event("\(seq):item-granted", seq: seq))
            }
            // One of them known only by its dead letter: the millisecond spans the tables.
            try await store.recordDeadLetter(Self.deadLetter("s2", user: "pager", at: at))
            let reader = try Self.reader(store)
            var seen: [String] = []
            var cursor: PurchaseCursor?
            for _ in 0..<5 {
                let page = try await reader.purchases(userId: "pager", before: cursor, limit: 2)
                seen += page.map(\.paymentSeq)
                guard page.count == 2, let last = page.last else { break }
                cursor = last.cursor
            }
            #expect(seen == ["s0", "s1", "s2", "s3", "s4"])
            // A time alone (typed by hand) keeps its meaning: what first appeared before it.
            let time = PurchaseCursor(firstSeen: at)
            #expect(try await reader.purchases(userId: "pager", before: time, limit: 9).isEmpty)
            let later = PurchaseCursor(firstSeen: at.addingTimeInterval(0.001))
            #expect(try await reader.purchases(userId: "pager", before: later, limit: 9).count == 5)
        }
    }

    /// Dead letters recorded in one millisecond are all paged through, each once, newest recorded first, of all
    /// reasons and of one.
    @Test(arguments: LedgerBackend.allCases)
    func deadLettersOfOneMillisecondArePagedThroughNoneSkipped(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            let at = Date(epochMilliseconds: 1_700_000_000_000)
            for index in 0..<5 {
                try await store.recordDeadLetter(Self.deadLetter("d\(index)", user: "u\(index)", at: at))
                if index == 2 {
                    var other = Self.deadLetter("m\(index)", user: "u\(index)", at: at)
                    other.reason = "malformed_message"
                    try await store.recordDeadLetter(other)
                }
            }
            let reader = try Self.reader(store)
            for (reason, expected) in [
                ("gamebase_unavailable", ["d4", "d3", "d2", "d1", "d0"]), (nil, ["d4", "d3", "m2", "d2", "d1", "d0"]),
            ] {
                var seen: [String] = []
                var cursor: DeadLetterCursor?
                for _ in 0..<6 {
                    let page = try await reader.deadLetters(reason: reason, before: cursor, limit: 2)
                    seen += page.compactMap(\.paymentSeq)
                    guard page.count == 2, let last = page.last else { break }
                    #expect(last.ledgerID != nil, "read with its row id")
                    cursor = last.cursor
                }
                #expect(seen == expected, "reason \(reason ?? "any")")
            }
            // A time alone keeps its meaning: what failed before it.
            let time = DeadLetterCursor(failedAt: at)
            #expect(try await reader.deadLetters(reason: nil, before: time, limit: 9).isEmpty)
            let later = DeadLetterCursor(failedAt: at.addingTimeInterval(0.001))
            #expect(try await reader.deadLetters(reason: nil, before: later, limit: 9).count == 6)
        }
    }

    /// The next page `find` hands out — in its JSON and on its "more:" line — reaches the purchases of the last one's
    /// millisecond, its paymentSeq holding a `/` and a space.
    @Test(arguments: LedgerBackend.allCases)
    func findsNextPageReachesTheRestOfItsLastMillisecond(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            let at = Date(epochMilliseconds: 1_700_000_000_000)
            for (seq, ms) in [("a", Int64(0)), ("b/x y", 0), ("c", 0), ("old", -1)] {
                _ = try await store.insertGrant(
                    LedgerStoreTests.grant(seq, user: "pager", at: at.addingTimeInterval(Double(ms) / 1000)),
                    event: LedgerStoreTests.event("\(seq):item-granted", seq: seq))
            }
            let finder = PurchaseFinder(reader: try Self.reader(store))
            var seen: [String] = []
            var before: String?
            for _ in 0..<5 {
                let result = try await finder.find(
                    "pager", as: .userId, before: before.flatMap(CursorText.purchase), limit: 2)
                seen += result.purchases.compactMap(\.paymentSeq)
                guard let next = FindOutput(result).nextBefore else { break }
                let word = next.contains(" ") ? "'\(next)'" : next
                #expect(FindTextRenderer.render(result).contains("--before \(word)\n"))
                before = next
            }
            #expect(seen == ["a", "b/x y", "c", "old"])
            #expect(before == "2023-11-14T22:13:19.999Z/old")
        }
    }

    static func deadLetter(_ seq: String, user: String, at date: Date) -> DeadLetterEntry {
        DeadLetterEntry(
            paymentSeq: seq, userId: user, tokenHash: nil, reason: "gamebase_unavailable", error: "", attempts: 6,
            deadLetterTopic: "purchase.completed.dlq", original: nil, originalTimestampMilliseconds: nil,
            failedAt: date, valueBytes: 10)
    }

    /// A purchase's place in its user's list is when it first appeared, over all its rows: one dead-lettered long ago
    /// and granted lately is neither skipped nor repeated by the pages (found in review: each table cut before the
    /// minimum skipped it).
    @Test(arguments: LedgerBackend.allCases)
    func pagesAcrossTablesNeitherSkipNorRepeat(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            func at(_ ms: Int64) -> Date { Date(epochMilliseconds: 1_700_000_000_000 + ms) }
            try await store.recordDeadLetter(
                DeadLetterEntry(
                    paymentSeq: "A", userId: "pager", tokenHash: nil, reason: "gamebase_unavailable", error: "",
                    attempts: 6,
                    deadLetterTopic: "purchase.completed.dlq", original: nil, originalTimestampMilliseconds: nil,
                    failedAt: at(100), valueBytes: 10))
            for (seq, ms) in [("A", Int64(500)), ("B", 400), ("C", 300)] {
                _ = try await store.insertGrant(
                    LedgerStoreTests.grant(seq, user: "pager", at: at(ms)),
                    event: LedgerStoreTests.event("\(seq):item-granted", seq: seq))
            }
            let reader = try Self.reader(store)
            let first = try await reader.purchases(userId: "pager", before: nil, limit: 2)
            #expect(first.map(\.paymentSeq) == ["B", "C"])
            let second = try await reader.purchases(userId: "pager", before: first.last?.cursor, limit: 2)
            #expect(second.map(\.paymentSeq) == ["A"])
        }
    }
}
