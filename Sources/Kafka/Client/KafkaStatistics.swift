import Foundation

/// The parts of librdkafka's statistics (`statistics.interval.ms`) that the worker reports.
public struct KafkaStatistics: Sendable, Hashable {
    /// Consumer lag per assigned partition: high watermark minus the committed (or stored) offset.
    public var consumerLag: [TopicPartition: Int64]
    /// Messages waiting in the producer's queue.
    public var queuedMessages: Int64

    public init(consumerLag: [TopicPartition: Int64] = [:], queuedMessages: Int64 = 0) {
        self.consumerLag = consumerLag
        self.queuedMessages = queuedMessages
    }

    /// Parses librdkafka's statistics JSON; `nil` when it is not the expected shape.
    public init?(json: [UInt8]) {
        guard let root = try? JSONSerialization.jsonObject(with: Data(json)) as? [String: Any] else { return nil }
        var lag: [TopicPartition: Int64] = [:]
        if let topics = root["topics"] as? [String: Any] {
            for (topic, value) in topics {
                guard let partitions = (value as? [String: Any])?["partitions"] as? [String: Any] else { continue }
                for (key, value) in partitions {
                    // Partition -1 is librdkafka's internal "unassigned" queue.
                    guard let partition = Int32(key), partition >= 0, let fields = value as? [String: Any] else {
                        continue
                    }
                    let consuming = (fields["fetch_state"] as? String).map { $0 != "none" } ?? false
                    if consuming, let value = (fields["consumer_lag"] as? NSNumber)?.int64Value, value >= 0 {
                        lag[TopicPartition(topic, partition)] = value
                    }
                }
            }
        }
        self.consumerLag = lag
        self.queuedMessages = (root["msg_cnt"] as? NSNumber)?.int64Value ?? 0
    }
}
