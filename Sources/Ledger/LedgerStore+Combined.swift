import Foundation

/// Combined operations: one round trip where the flow needs two. Stores override them when they can do
/// better than the defaults here, which call the single operations in turn.
extension LedgerStore {
    /// The grant of `paymentSeq` and the rejection of one message, read together.
    public func lookup(paymentSeq: String, rejection key: RejectionKey) async throws -> (
        grant: GrantRecord?, rejection: RejectionRecord?
    ) {
        if let grant = try await grant(paymentSeq: paymentSeq) { return (grant, nil) }
        return (nil, try await rejection(key))
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
