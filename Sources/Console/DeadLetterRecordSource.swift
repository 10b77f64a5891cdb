/// Where the console reads a dead-lettered record's value when `console.show_payloads` is on: the dead-letter topic,
/// read by the worker's Kafka adapter. Only that topic: the console names a partition and an offset, never a topic.
public protocol DeadLetterRecordSource: Sendable {
    /// The dead-letter topic.
    var topic: String { get }

    /// The value of the record at `offset` of `partition`, or `nil` when the topic no longer holds it (retention,
    /// compaction) or it did not arrive in time.
    /// - Throws: when Kafka cannot be read.
    func value(partition: Int32, offset: Int64) async throws -> [UInt8]?
}
