import Foundation
import Kafka

/// A Kafka endpoint that tests and the benchmark run against: librdkafka's mock cluster in this process
/// (``MockCluster``), a real broker process on loopback (``TansuBroker``) or a cluster named by its address
/// (``ExternalKafka``).
public protocol KafkaEndpoint: AnyObject, Sendable {
    /// The bootstrap servers, `host:port,host:port,…`.
    var bootstrapServers: String { get }
    /// Creates a topic of `partitions` partitions (replication factor 1 on the mock and Tansu; the cluster's
    /// default on an ``ExternalKafka``).
    func createTopic(_ name: String, partitions: Int) throws
}

/// The brokers the Kafka-touching tests start.
public enum KafkaEndpointKind: String, Sendable {
    /// librdkafka's mock cluster: fault injection and several brokers, group timings of its own.
    case mock
    /// Tansu, a Kafka-compatible broker (Rust, Apache-2.0), one broker with in-memory storage.
    case tansu

    /// The kind the tests run on: `IAP_TEST_KAFKA_BROKER` (`mock`, the default, or `tansu`). An unknown name is
    /// a fatal error: a typo must not quietly run the mock.
    public static var underTest: KafkaEndpointKind {
        guard let name = ProcessInfo.processInfo.environment["IAP_TEST_KAFKA_BROKER"], !name.isEmpty else {
            return .mock
        }
        guard let kind = KafkaEndpointKind(rawValue: name) else {
            fatalError("IAP_TEST_KAFKA_BROKER is \"\(name)\"; it takes mock or tansu")
        }
        return kind
    }
}
