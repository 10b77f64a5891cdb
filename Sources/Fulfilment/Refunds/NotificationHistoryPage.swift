import Foundation

/// One page of notification history: each notification's `signedPayload` (verified before anything in it is
/// believed), and where the next page starts.
public struct NotificationHistoryPage: Sendable, Hashable {
    public var signedPayloads: [String]
    public var hasMore: Bool
    public var paginationToken: String?

    public init(signedPayloads: [String], hasMore: Bool, paginationToken: String?) {
        self.signedPayloads = signedPayloads
        self.hasMore = hasMore
        self.paginationToken = paginationToken
    }
}
