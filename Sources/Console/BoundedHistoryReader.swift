import Foundation
import Fulfilment
import Lookup
import Synchronization

/// The ledger's read port as the console uses it: every read ends within its deadline, answered or not (a database
/// that stops answering makes a page say so, never hang), and at most ``maxConcurrentReads`` run at once — counted until
/// each read ends, past its deadline too — so however often the console is asked, the purchase path keeps the ledger's
/// connections.
struct BoundedHistoryReader: HistoryLedger {
    let base: any HistoryLedger
    let timeout: Duration
    let watchdog: DeadlineWatchdog
    private let gate: ConsoleGate

    static let maxConcurrentReads = 4

    init(_ base: any HistoryLedger, timeout: Duration) {
        self.base = base
        self.timeout = timeout
        watchdog = DeadlineWatchdog()
        gate = ConsoleGate(limit: Self.maxConcurrentReads)
    }

    func bounded<T: Sendable>(_ what: String, _ read: @escaping @Sendable () async throws -> T) async throws
        -> T
    {
        guard gate.enter() else { throw ConsoleBusy() }
        // The slot is held until the read itself ends, not until its deadline: a read left running by its deadline
        // still holds a connection, so a ledger that hangs makes the console say "busy" rather than pile reads up.
        let gate = gate
        return try await watchdog.run(timeout, "the ledger's \(what)") {
            defer { gate.leave() }
            return try await read()
        }
    }

    func history(paymentSeq: String) async throws -> PurchaseHistory {
        try await bounded("history of a purchase") { [base] in try await base.history(paymentSeq: paymentSeq) }
    }

    func paymentSeqs(paymentId: String, limit: Int) async throws -> [String] {
        try await bounded("payment id lookup") { [base] in
            try await base.paymentSeqs(paymentId: paymentId, limit: limit)
        }
    }

    func purchases(userId: String, before cursor: PurchaseCursor?, limit: Int) async throws -> [PurchaseReference] {
        try await bounded("user's purchases") { [base] in
            try await base.purchases(userId: userId, before: cursor, limit: limit)
        }
    }

    func deadLetters(original source: MessageSource) async throws -> [DeadLetterEntry] {
        try await bounded("dead letters of a message") { [base] in try await base.deadLetters(original: source) }
    }

    func deadLetters(reason: String?, before cursor: DeadLetterCursor?, limit: Int) async throws -> [DeadLetterEntry] {
        try await bounded("dead letters") { [base] in
            try await base.deadLetters(reason: reason, before: cursor, limit: limit)
        }
    }
}

/// More console reads were asked for at once than it makes.
struct ConsoleBusy: Error, CustomStringConvertible {
    var description: String { "the console is answering as many ledger reads as it makes at once; try again" }
}
