import CRdKafka
import Logging
import Synchronization

/// A Kafka producer over librdkafka, idempotent with `acks=all` unless configured otherwise.
///
/// ``send(_:)`` returns when the broker has acknowledged the record (the delivery report), or throws the
/// delivery error. A dedicated thread serves delivery reports.
public final class KafkaProducer: Sendable {
    let client: RDKafkaClient
    private let pollThread: PollThread
    private let closing = StopFlag()
    private let logger: Logger

    /// - Throws: ``KafkaError`` with code `.configuration` naming a rejected property, or `.clientCreation`.
    public init(
        configuration: KafkaProducerConfiguration, logger: Logger,
        onStatistics: (@Sendable (KafkaStatistics) -> Void)? = nil
    ) throws(KafkaError) {
        let context = RDKafkaClientContext(logger: logger, onStatistics: onStatistics)
        let client = try RDKafkaClient(
            type: RD_KAFKA_PRODUCER, configuration: configuration.effectiveProperties, context: context
        ) {
            conf in
            rd_kafka_conf_set_dr_msg_cb(conf) { _, message, _ in
                guard let message, let opaque = message.pointee._private else { return }
                let pending = Unmanaged<PendingDelivery>.fromOpaque(opaque).takeRetainedValue()
                pending.complete(message.pointee)
            }
        }
        self.client = client
        self.logger = logger
        let closing = self.closing
        self.pollThread = PollThread(name: "kafka-producer-poll") {
            while !closing.isSet {
                rd_kafka_poll(client.handle, 100)
            }
        }
    }

    deinit {
        closing.set()
    }

    /// Produces one record and waits for its delivery report.
    ///
    /// - Returns: where the record was written.
    /// - Throws: ``KafkaError`` `.produce` when it cannot be enqueued (unknown topic, too large, closed), or
    ///   `.delivery` when the broker did not acknowledge it within `message.timeout.ms`.
    @discardableResult
    public func send(_ record: KafkaProducerRecord) async throws(KafkaError) -> KafkaDeliveryReport {
        if closing.isSet { throw KafkaError(code: .closed, message: "the producer is closed") }
        let result: Result<KafkaDeliveryReport, KafkaError> = await withCheckedContinuation { continuation in
            let pending = PendingDelivery(continuation)
            if let error = enqueue(record, pending: pending) {
                continuation.resume(returning: .failure(error))
            }
        }
        return try result.get()
    }

    /// Enqueues the record, waiting briefly while librdkafka's queue is full; returns the error if it fails.
    private func enqueue(_ record: KafkaProducerRecord, pending: PendingDelivery) -> KafkaError? {
        let opaque = Unmanaged.passRetained(pending).toOpaque()
        var attempts = 0
        while true {
            let headers = Self.makeHeaders(record.headers)
            // withCString explicitly: the implicit conversion copies a short topic name to the heap every call.
            let err = record.topic.withCString { topic in
                record.value.withUnsafeBytes { value in
                    Self.withOptionalBytes(record.key) { key in
                        iap_rd_kafka_produce(
                            client.handle, topic, record.partition ?? RD_KAFKA_PARTITION_UA,
                            key?.baseAddress, key?.count ?? 0, value.baseAddress, value.count, headers, opaque)
                    }
                }
            }
            if err == RD_KAFKA_RESP_ERR_NO_ERROR { return nil }
            if let headers { rd_kafka_headers_destroy(headers) }
            // A full local queue drains as the broker acknowledges; wait for it (up to about 5 s).
            if err == RD_KAFKA_RESP_ERR__QUEUE_FULL && attempts < 500 {
                attempts += 1
                rd_kafka_poll(client.handle, 10)
                continue
            }
            Unmanaged<PendingDelivery>.fromOpaque(opaque).release()
            return KafkaError.from(err, code: .produce, context: "produce to \(record.topic)")
        }
    }

    /// Waits until every enqueued record has its delivery report.
    public func flush(timeoutMilliseconds: Int32 = 10_000) async throws(KafkaError) {
        let client = client
        let err = await ConsumerCore.offPool { rd_kafka_flush(client.handle, timeoutMilliseconds) }
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError.from(err, code: .timeout, context: "flush") }
    }

    /// Flushes outstanding records and stops the delivery thread. Safe to call more than once.
    public func close(timeoutMilliseconds: Int32 = 10_000) async {
        do {
            try await flush(timeoutMilliseconds: timeoutMilliseconds)
        } catch {
            logger.warning("producer closed with undelivered records", metadata: ["kafka.error": "\(error.message)"])
        }
        closing.set()
        await pollThread.join()
    }

    /// The latest librdkafka statistics (needs `statistics.interval.ms` > 0).
    public var statistics: KafkaStatistics? { client.context.statistics }

    /// A broker this process's clients reach but cannot speak to, met by any of them in the last two minutes: what
    /// `check-config` says instead of a bare transport failure.
    public var brokerProblem: KafkaBrokerProblem? { client.context.brokerProblem }

    private static func makeHeaders(_ headers: [KafkaHeader]) -> OpaquePointer? {
        guard !headers.isEmpty else { return nil }
        let list = rd_kafka_headers_new(headers.count)!
        for header in headers {
            if let value = header.value {
                value.withUnsafeBytes { bytes in
                    _ = rd_kafka_header_add(list, header.name, -1, bytes.baseAddress, bytes.count)
                }
            } else {
                _ = rd_kafka_header_add(list, header.name, -1, nil, 0)
            }
        }
        return list
    }

    private static func withOptionalBytes<R>(_ bytes: [UInt8]?, _ body: (UnsafeRawBufferPointer?) -> R) -> R {
        guard let bytes else { return body(nil) }
        return bytes.withUnsafeBytes { body($0) }
    }
}

/// The continuation of one ``KafkaProducer/send(_:)``, passed through librdkafka as the message opaque.
final class PendingDelivery: Sendable {
    private let continuation: CheckedContinuation<Result<KafkaDeliveryReport, KafkaError>, Never>

    init(_ continuation: CheckedContinuation<Result<KafkaDeliveryReport, KafkaError>, Never>) {
        self.continuation = continuation
    }

    func complete(_ message: rd_kafka_message_t) {
        let topic = message.rkt.map { String(cString: rd_kafka_topic_name($0)) } ?? ""
        if message.err == RD_KAFKA_RESP_ERR_NO_ERROR {
            continuation.resume(
                returning: .success(
                    KafkaDeliveryReport(topic: topic, partition: message.partition, offset: message.offset)))
        } else {
            continuation.resume(
                returning: .failure(KafkaError.from(message.err, code: .delivery, context: "deliver to \(topic)")))
        }
    }
}
