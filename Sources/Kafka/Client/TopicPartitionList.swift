import CRdKafka

/// Owns an `rd_kafka_topic_partition_list_t`, destroyed with this value.
final class TopicPartitionList {
    let pointer: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>

    init<S: Sequence>(_ partitions: S) where S.Element == TopicPartition {
        let array = Array(partitions)
        pointer = rd_kafka_topic_partition_list_new(Int32(max(1, array.count)))
        for partition in array {
            rd_kafka_topic_partition_list_add(pointer, partition.topic, partition.partition)
        }
    }

    /// A list whose entries carry offsets.
    init(_ offsets: [TopicPartition: Int64]) {
        pointer = rd_kafka_topic_partition_list_new(Int32(max(1, offsets.count)))
        for (partition, offset) in offsets {
            rd_kafka_topic_partition_list_add(pointer, partition.topic, partition.partition).pointee.offset = offset
        }
    }

    deinit {
        rd_kafka_topic_partition_list_destroy(pointer)
    }

    var offsets: [(TopicPartition, Int64)] {
        Self.entries(of: pointer).map { (TopicPartition(String(cString: $0.topic), $0.partition), $0.offset) }
    }

    func firstError() -> (partition: TopicPartition, error: rd_kafka_resp_err_t)? {
        for entry in Self.entries(of: pointer) where entry.err != RD_KAFKA_RESP_ERR_NO_ERROR {
            return (TopicPartition(String(cString: entry.topic), entry.partition), entry.err)
        }
        return nil
    }

    /// The entries librdkafka marked with an error (a pause or resume of a partition it does not know, say).
    var failed: Set<TopicPartition> {
        Set(
            Self.entries(of: pointer).lazy.filter { $0.err != RD_KAFKA_RESP_ERR_NO_ERROR }.map {
                TopicPartition(String(cString: $0.topic), $0.partition)
            })
    }

    static func partitions(of list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>) -> [TopicPartition] {
        entries(of: list).map { TopicPartition(String(cString: $0.topic), $0.partition) }
    }

    private static func entries(of list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>) -> UnsafeBufferPointer<
        rd_kafka_topic_partition_t
    > {
        UnsafeBufferPointer(start: list.pointee.elems, count: Int(list.pointee.cnt))
    }
}

extension KafkaMessage {
    /// Copies a message out of librdkafka's memory; the caller still destroys `message`.
    init(copying message: UnsafeMutablePointer<rd_kafka_message_t>) {
        let m = message.pointee
        let topic = String(cString: rd_kafka_topic_name(m.rkt))
        let value = m.payload.map { Array(UnsafeRawBufferPointer(start: $0, count: m.len)) } ?? []
        let key = m.key.map { Array(UnsafeRawBufferPointer(start: $0, count: m.key_len)) }
        var timestampType = RD_KAFKA_TIMESTAMP_NOT_AVAILABLE
        let timestamp = rd_kafka_message_timestamp(message, &timestampType)
        var headers: [KafkaHeader] = []
        var cHeaders: OpaquePointer?
        if rd_kafka_message_headers(message, &cHeaders) == RD_KAFKA_RESP_ERR_NO_ERROR, let cHeaders {
            let count = rd_kafka_header_cnt(cHeaders)
            headers.reserveCapacity(count)
            for index in 0..<count {
                var name: UnsafePointer<CChar>?
                var value: UnsafeRawPointer?
                var size = 0
                guard rd_kafka_header_get_all(cHeaders, index, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR,
                    let name
                else { continue }
                headers.append(
                    KafkaHeader(
                        name: String(cString: name),
                        value: value.map { Array(UnsafeRawBufferPointer(start: $0, count: size)) }))
            }
        }
        self.init(
            topic: topic, partition: m.partition, offset: m.offset,
            timestampMilliseconds: timestamp >= 0 ? timestamp : nil, key: key, value: value, headers: headers)
    }
}
