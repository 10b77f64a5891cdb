import CRdKafka
import Kafka
import Logging

/// A Kafka cluster this process did not start, named by its bootstrap servers (`iap-dev bench --bootstrap`): topics
/// are created over the Kafka protocol (CreateTopics), with the broker's default replication factor.
public final class ExternalKafka: KafkaEndpoint {
    public let bootstrapServers: String
    /// The admin requests' client: one connection to the cluster for every topic created.
    private let client: RDKafkaClient

    public init(bootstrapServers: String, logger: Logger) throws(KafkaError) {
        self.bootstrapServers = bootstrapServers
        client = try RDKafkaClient(
            type: RD_KAFKA_PRODUCER, configuration: KafkaConfiguration(bootstrapServers: bootstrapServers),
            context: RDKafkaClientContext(logger: logger))
    }

    /// Creates `name` with `partitions` partitions; a topic that exists already is an error (its records would mix
    /// with the new ones).
    public func createTopic(_ name: String, partitions: Int) throws {
        var errstr = [CChar](repeating: 0, count: 512)
        // -1: the broker's default replication factor (a cluster that wants 3 replicas gets them).
        guard let topic = rd_kafka_NewTopic_new(name, Int32(partitions), -1, &errstr, errstr.count) else {
            throw KafkaError(code: .configuration, message: "topic \(name): \(String(errorBuffer: errstr))")
        }
        defer { rd_kafka_NewTopic_destroy(topic) }
        guard let queue = rd_kafka_queue_new(client.handle) else {
            throw KafkaError(code: .clientCreation, message: "librdkafka could not make a queue")
        }
        defer { rd_kafka_queue_destroy(queue) }
        let options = rd_kafka_AdminOptions_new(client.handle, RD_KAFKA_ADMIN_OP_CREATETOPICS)
        defer { rd_kafka_AdminOptions_destroy(options) }
        _ = rd_kafka_AdminOptions_set_operation_timeout(options, 15_000, &errstr, errstr.count)
        var topics: [OpaquePointer?] = [topic]
        rd_kafka_CreateTopics(client.handle, &topics, 1, options, queue)
        guard let event = rd_kafka_queue_poll(queue, 30_000) else {
            throw KafkaError(code: .timeout, message: "no answer to creating topic \(name) within 30 s")
        }
        defer { rd_kafka_event_destroy(event) }
        let eventError = rd_kafka_event_error(event)
        guard eventError == RD_KAFKA_RESP_ERR_NO_ERROR, let result = rd_kafka_event_CreateTopics_result(event) else {
            throw KafkaError.from(eventError, code: .timeout, context: "create topic \(name)")
        }
        var count = 0
        guard let results = rd_kafka_CreateTopics_result_topics(result, &count) else { return }
        for index in 0..<count {
            let err = rd_kafka_topic_result_error(results[index])
            guard err != RD_KAFKA_RESP_ERR_NO_ERROR else { continue }
            let text = rd_kafka_topic_result_error_string(results[index]).map { String(cString: $0) } ?? "\(err)"
            throw KafkaError(code: .configuration, message: "create topic \(name): \(text)")
        }
    }
}
