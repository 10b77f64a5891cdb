import CRdKafka
import CRdKafka.Mock
import Kafka
import Logging

/// librdkafka's mock Kafka cluster: real brokers speaking the Kafka protocol on loopback, in this process,
/// with consumer groups and fault injection. For tests, the demo, the benchmark and `iap-dev dev-kafka`.
///
/// Its group timings differ from a real broker's (first join takes about 3 s; a killed member's partitions
/// come back after about two session timeouts).
public final class MockCluster: KafkaEndpoint, @unchecked Sendable {
    // Thread-safety: the mock cluster runs on its own librdkafka thread; every call below enqueues an
    // operation to it and is safe from any thread.
    private let host: RDKafkaClient
    private let cluster: OpaquePointer

    /// The bootstrap servers, `host:port,host:port,…`.
    public let bootstrapServers: String
    public let brokerCount: Int

    /// Starts `brokers` mock brokers (ids 1 … `brokers`) listening on loopback.
    public init(brokers: Int = 3, logger: Logger = Logger(label: "kafka.mock")) throws(KafkaError) {
        // The cluster lives inside a client handle; this one never produces anything and has no
        // bootstrap servers by design, so its notice-level "no bootstrap.servers" line is left out.
        host = try RDKafkaClient(
            type: RD_KAFKA_PRODUCER,
            configuration: KafkaConfiguration(
                bootstrapServers: "", properties: ["log.connection.close": "false", "log_level": "4"]),
            context: RDKafkaClientContext(logger: logger))
        guard let cluster = rd_kafka_mock_cluster_new(host.handle, Int32(brokers)) else {
            throw KafkaError(code: .mockCluster, message: "librdkafka could not start a mock cluster")
        }
        self.cluster = cluster
        self.brokerCount = brokers
        self.bootstrapServers = String(cString: rd_kafka_mock_cluster_bootstraps(cluster))
    }

    deinit {
        rd_kafka_mock_cluster_destroy(cluster)
    }

    /// Creates a topic (replication factor 1).
    public func createTopic(_ name: String, partitions: Int) throws(KafkaError) {
        let err = rd_kafka_mock_topic_create(cluster, name, Int32(partitions), 1)
        try check(err, "create topic \(name)")
    }

    /// Takes broker `id` down: its connections close and new ones are refused until ``setBrokerUp(_:)``.
    public func setBrokerDown(_ id: Int32) throws(KafkaError) {
        try check(rd_kafka_mock_broker_set_down(cluster, id), "take broker \(id) down")
    }

    public func setBrokerUp(_ id: Int32) throws(KafkaError) {
        try check(rd_kafka_mock_broker_set_up(cluster, id), "bring broker \(id) up")
    }

    /// Adds `milliseconds` of round-trip latency to broker `id`'s responses.
    public func setRoundTripTime(broker id: Int32, milliseconds: Int) throws(KafkaError) {
        try check(rd_kafka_mock_broker_set_rtt(cluster, id, Int32(milliseconds)), "set rtt of broker \(id)")
    }

    /// Makes the next requests of Kafka API `apiKey` (e.g. 0 Produce, 1 Fetch, 8 OffsetCommit) fail,
    /// one error per request, in order.
    public func pushRequestErrors(apiKey: Int16, errors: [RDKafkaErrorCode]) {
        var codes = errors.map { $0.cValue }
        rd_kafka_mock_push_request_errors_array(cluster, apiKey, codes.count, &codes)
    }

    /// Makes every request for `topic` fail with `error` until cleared with `.noError`.
    public func setTopicError(_ topic: String, error: RDKafkaErrorCode) {
        rd_kafka_mock_topic_set_error(cluster, topic, error.cValue)
    }

    private func check(_ err: rd_kafka_resp_err_t, _ what: String) throws(KafkaError) {
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError.from(err, code: .mockCluster, context: what) }
    }
}

/// Kafka API keys for ``MockCluster/pushRequestErrors(apiKey:errors:)``.
public enum KafkaAPIKey {
    public static let produce: Int16 = 0
    public static let fetch: Int16 = 1
    public static let offsetCommit: Int16 = 8
    public static let offsetFetch: Int16 = 9
    public static let findCoordinator: Int16 = 10
    public static let joinGroup: Int16 = 11
    public static let heartbeat: Int16 = 12
    public static let syncGroup: Int16 = 14
}
