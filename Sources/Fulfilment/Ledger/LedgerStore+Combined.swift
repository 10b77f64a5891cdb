import Foundation

/// Combined operations: one round trip where the flow needs two. They are protocol requirements, so a store's
/// own version is the one that runs through `any LedgerStore`; these defaults call the single operations in turn.
extension LedgerStore {
    /// The grant of `paymentSeq` and the rejection of one message, read together.
    public func lookup(paymentSeq: String, rejection key: RejectionKey) async throws -> (
        grant: GrantRecord?, rejection: RejectionRecord?
    ) {
        (try await grant(paymentSeq: paymentSeq), try await rejection(key))
    }

    /// ``markConsumed(paymentSeq:resultCode:at:)``, first marking `publishedEventID` published when given.
    @discardableResult
    public func markConsumed(paymentSeq: String, resultCode: Int, at date: Date, publishedEventID: String?) async throws -> Bool {
        if let publishedEventID { try await markPublished(eventID: publishedEventID, at: date) }
        return try await markConsumed(paymentSeq: paymentSeq, resultCode: resultCode, at: date)
    }

    /// ``recordConsumeFailure(paymentSeq:resultCode:)``, first marking `publishedEventID` published when given.
    public func recordConsumeFailure(paymentSeq: String, resultCode: Int?, at date: Date, publishedEventID: String?) async throws {
        if let publishedEventID { try await markPublished(eventID: publishedEventID, at: date) }
        try await recordConsumeFailure(paymentSeq: paymentSeq, resultCode: resultCode)
    }
}
