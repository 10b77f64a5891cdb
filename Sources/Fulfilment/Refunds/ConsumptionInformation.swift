import Foundation

/// The body of Send Consumption Information, from the ledger's delivery evidence and the studio's settings.
public struct ConsumptionInformation: Sendable, Hashable {
    /// `DELIVERED`, or why not: `UNDELIVERED_QUALITY_ISSUE`, `UNDELIVERED_WRONG_ITEM`, `UNDELIVERED_SERVER_OUTAGE`,
    /// `UNDELIVERED_OTHER`.
    public var deliveryStatus: String
    /// The studio's statement that its terms obtain the player's consent (`refunds.apple.customer_consented`).
    public var customerConsented: Bool
    /// `refunds.apple.sample_content_provided`.
    public var sampleContentProvided: Bool
    /// Milliunits of the purchase consumed (0…100000), when known.
    public var consumptionPercentage: Int?
    /// `refunds.apple.refund_preference`: `GRANT_FULL`, `GRANT_PRORATED` or `DECLINE`; `nil` leaves it to Apple.
    public var refundPreference: String?

    public init(
        deliveryStatus: String, customerConsented: Bool, sampleContentProvided: Bool,
        consumptionPercentage: Int? = nil, refundPreference: String? = nil
    ) {
        self.deliveryStatus = deliveryStatus
        self.customerConsented = customerConsented
        self.sampleContentProvided = sampleContentProvided
        self.consumptionPercentage = consumptionPercentage
        self.refundPreference = refundPreference
    }
}
