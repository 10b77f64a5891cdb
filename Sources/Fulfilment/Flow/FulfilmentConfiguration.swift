import Gamebase

/// The flow's settings (topics, policies) from the worker configuration.
public struct FulfilmentConfiguration: Sendable {
    public var events: EventFactory
    public var deadLetters: DeadLetterFactory
    /// `worker.reject_test_purchases`.
    public var rejectTestPurchases: Bool
    /// `worker.max_message_bytes`.
    public var maxMessageBytes: Int
    /// Retries of Get Payment Transaction within one message.
    public var verifyRetry: RetryPolicy
    /// Retries of Consume within one message (the sweeper retries later).
    public var consumeRetry: RetryPolicy

    public init(
        groupID: String, itemGrantedTopic: String = "iap.item-granted",
        consumeFailedTopic: String = "iap.consume-failed", itemRevokedTopic: String = "iap.item-revoked",
        deadLetterTopic: String = "purchase.completed.dlq", workerName: String = "iap-worker",
        rejectTestPurchases: Bool = false, maxMessageBytes: Int = 65_536, verifyRetry: RetryPolicy = RetryPolicy(),
        consumeRetry: RetryPolicy = RetryPolicy()
    ) {
        self.events = EventFactory(
            groupID: groupID, itemGrantedTopic: itemGrantedTopic, consumeFailedTopic: consumeFailedTopic,
            itemRevokedTopic: itemRevokedTopic)
        self.deadLetters = DeadLetterFactory(topic: deadLetterTopic, workerName: workerName)
        self.rejectTestPurchases = rejectTestPurchases
        self.maxMessageBytes = maxMessageBytes
        self.verifyRetry = verifyRetry
        self.consumeRetry = consumeRetry
    }
}
