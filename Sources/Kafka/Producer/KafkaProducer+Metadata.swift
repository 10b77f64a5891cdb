import CRdKafka

/// What the brokers report about the cluster.
public struct KafkaClusterMetadata: Sendable, Hashable {
    public var brokers: Int
    /// Partition count by topic.
    public var topics: [String: Int]
}

extension KafkaProducer {
    /// Asks the cluster for its brokers and topics (a connectivity check).
    public func metadata(timeoutMilliseconds: Int32 = 10_000) async throws(KafkaError) -> KafkaClusterMetadata {
        let client = self.client
        let result: Result<KafkaClusterMetadata, KafkaError> = await ConsumerCore.offPool {
            var pointer: UnsafePointer<rd_kafka_metadata>?
            let err = rd_kafka_metadata(client.handle, 1, nil, &pointer, timeoutMilliseconds)
            guard err == RD_KAFKA_RESP_ERR_NO_ERROR, let metadata = pointer else {
                return .failure(KafkaError.from(err, code: .timeout, context: "metadata request"))
            }
            defer { rd_kafka_metadata_destroy(metadata) }
            var topics: [String: Int] = [:]
            for index in 0..<Int(metadata.pointee.topic_cnt) {
                let topic = metadata.pointee.topics[index]
                guard topic.err == RD_KAFKA_RESP_ERR_NO_ERROR else { continue }
                topics[String(cString: topic.topic)] = Int(topic.partition_cnt)
            }
            return .success(KafkaClusterMetadata(brokers: Int(metadata.pointee.broker_cnt), topics: topics))
        }
        return try result.get()
    }
}
