import Foundation

/// The parts of librdkafka's statistics (`statistics.interval.ms`) that the worker reports.
public struct KafkaStatistics: Sendable, Hashable {
    /// Consumer lag per assigned partition: high watermark minus the committed (or stored) offset.
    public var consumerLag: [TopicPartition: Int64]
    /// Messages waiting in the producer's queue.
    public var queuedMessages: Int64
    /// The partitions whose fetch librdkafka has started (its `fetch_state` neither `none` nor stopping or stopped).
    public var fetchStarted: Set<TopicPartition>
    /// When librdkafka made these statistics (its `ts`, from `rd_clock`): microseconds on `CLOCK_MONOTONIC`, or on the
    /// wall clock on Apple's systems.
    public var monotonicMicroseconds: Int64?

    public init(
        consumerLag: [TopicPartition: Int64] = [:], queuedMessages: Int64 = 0, fetchStarted: Set<TopicPartition> = [],
        monotonicMicroseconds: Int64? = nil
    ) {
        self.consumerLag = consumerLag
        self.queuedMessages = queuedMessages
        self.fetchStarted = fetchStarted
        self.monotonicMicroseconds = monotonicMicroseconds
    }

    /// Parses librdkafka's statistics JSON; `nil` when it is not the expected shape.
    public init?(json: [UInt8]) {
        guard let root = try? JSONSerialization.jsonObject(with: Data(json)) as? [String: Any] else { return nil }
        var lag: [TopicPartition: Int64] = [:]
        var started: Set<TopicPartition> = []
        if let topics = root["topics"] as? [String: Any] {
            for (topic, value) in topics {
                guard let partitions = (value as? [String: Any])?["partitions"] as? [String: Any] else { continue }
                for (key, value) in partitions {
                    // Partition -1 is librdkafka's internal "unassigned" queue.
                    guard let partition = Int32(key), partition >= 0, let fields = value as? [String: Any] else {
                        continue
                    }
                    let state = fields["fetch_state"] as? String
                    let consuming = state.map { $0 != "none" } ?? false
                    if consuming, let value = (fields["consumer_lag"] as? NSNumber)?.int64Value, value >= 0 {
                        lag[TopicPartition(topic, partition)] = value
                    }
                    if let state, !["none", "stopping", "stopped"].contains(state) {
                        started.insert(TopicPartition(topic, partition))
                    }
                }
            }
        }
        self.consumerLag = lag
        self.queuedMessages = (root["msg_cnt"] as? NSNumber)?.int64Value ?? 0
        self.fetchStarted = started
        self.monotonicMicroseconds = (root["ts"] as? NSNumber)?.int64Value
    }
}
