import Foundation
import Fulfilment
import Synchronization

/// A ledger whose lookups fail for some users: what one user's payments the database refuses look like to a pass.
final class RefusingLedger: LedgerPassThrough {
    let base: any LedgerStore
    /// Users whose rejection lookups fail, as a statement the database refuses would.
    let refusedUsers = Mutex<Set<String>>([])

    init(_ base: any LedgerStore) { self.base = base }

    func rejection(_ key: RejectionKey) async throws -> RejectionRecord? {
        if refusedUsers.withLock({ $0.contains(key.userId) }) {
            throw LedgerError(code: .query, message: "refused for the test")
        }
        return try await base.rejection(key)
    }
}
