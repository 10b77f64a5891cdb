/// What an identifier a player or a system holds is taken to be.
public enum IdentifierKind: String, Sendable, Hashable, CaseIterable, Codable {
    case paymentSeq = "payment_seq"
    case paymentId = "payment_id"
    case userId = "user_id"
    case eventId = "event_id"
    /// A store notification's id (Apple's notificationUUID; Google's, derived from what it says).
    case notificationId = "notification_id"
}
