import Engine
import Foundation
import Fulfilment

extension WorkerConfiguration {
    /// This instance's name in its dead-letter records and the console: `kafka.group_instance_id` or the host name.
    public var workerName: String { groupInstanceID ?? ProcessInfo.processInfo.hostName }

    /// The flow's settings; `workerName` signs its dead-letter records.
    public func fulfilmentConfiguration(workerName: String) -> FulfilmentConfiguration {
        FulfilmentConfiguration(
            groupID: groupID, itemGrantedTopic: topics.itemGranted, consumeFailedTopic: topics.consumeFailed,
            itemRevokedTopic: topics.itemRevoked, deadLetterTopic: topics.deadLetter, workerName: workerName,
            rejectTestPurchases: rejectTestPurchases,
            maxMessageBytes: maxMessageBytes, verifyRetry: retry, consumeRetry: retry)
    }

    /// The engine's settings.
    public func engineConfiguration(workerName: String) -> EngineConfiguration {
        EngineConfiguration(
            engine: PurchaseEngine.Configuration(
                purchasesTopic: topics.purchases, maxInFlight: maxInFlight, maxInFlightBytes: maxInFlightBytes,
                shutdownTimeout: .milliseconds(shutdownTimeoutMilliseconds), breaker: breaker),
            fulfilment: fulfilmentConfiguration(workerName: workerName), ledgerCallTimeout: ledgerCallTimeout,
            sweep: Sweeper.Configuration(interval: sweepInterval, grace: sweepGrace), reconcile: reconcile,
            retention: retention)
    }
}
