import CRdKafka

/// An error from the Kafka layer.
///
/// `description` carries librdkafka's own message, which names properties and brokers but never
/// property *values*, so secrets such as `sasl.password` do not leak into logs.
public struct KafkaError: Error, CustomStringConvertible, Sendable {
    /// What went wrong, as a stable code the caller can switch on.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case configuration, clientCreation, subscription, consume, offsetStore, commit
            case partitionControl, produce, delivery, mockCluster, closed, timeout
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// A property was rejected, or a required setting is missing.
        public static let configuration = Code(.configuration)
        /// librdkafka could not create the client handle.
        public static let clientCreation = Code(.clientCreation)
        public static let subscription = Code(.subscription)
        /// The consumer reported an error while fetching.
        public static let consume = Code(.consume)
        public static let offsetStore = Code(.offsetStore)
        public static let commit = Code(.commit)
        /// Pausing or resuming partitions failed.
        public static let partitionControl = Code(.partitionControl)
        /// The message could not be enqueued.
        public static let produce = Code(.produce)
        /// The broker did not acknowledge the message.
        public static let delivery = Code(.delivery)
        public static let mockCluster = Code(.mockCluster)
        /// The client was already closed.
        public static let closed = Code(.closed)
        public static let timeout = Code(.timeout)

        public var description: String { base.rawValue }
    }

    public let code: Code
    /// librdkafka's error code, when librdkafka reported one.
    public let rdKafkaCode: RDKafkaErrorCode?
    /// A one-line explanation.
    public let message: String
    /// The client can no longer be used and must be recreated (librdkafka's fatal errors).
    public let isFatal: Bool
    /// Trying the same operation again may succeed.
    public let isRetryable: Bool
    public let file: String
    public let line: UInt

    public init(
        code: Code,
        rdKafkaCode: RDKafkaErrorCode? = nil,
        message: String,
        isFatal: Bool = false,
        isRetryable: Bool? = nil,
        file: String = #fileID,
        line: UInt = #line
    ) {
        self.code = code
        self.rdKafkaCode = rdKafkaCode
        self.message = message
        self.isFatal = isFatal
        self.isRetryable = isRetryable ?? (rdKafkaCode?.isRetryable ?? false)
        self.file = file
        self.line = line
    }

    public var description: String {
        var text = "KafkaError(\(code)"
        if let rdKafkaCode { text += ", \(rdKafkaCode.name)" }
        text += "): \(message)"
        if isFatal { text += " [fatal]" }
        return text
    }

    /// Wraps an `rd_kafka_error_t`, destroying it.
    static func consuming(_ error: OpaquePointer, code: Code, file: String = #fileID, line: UInt = #line) -> KafkaError
    {
        defer { rd_kafka_error_destroy(error) }
        return KafkaError(
            code: code,
            rdKafkaCode: RDKafkaErrorCode(rd_kafka_error_code(error)),
            message: String(cString: rd_kafka_error_string(error)),
            isFatal: rd_kafka_error_is_fatal(error) != 0,
            isRetryable: rd_kafka_error_is_retriable(error) != 0,
            file: file,
            line: line
        )
    }

    package static func from(
        _ err: rd_kafka_resp_err_t, code: Code, context: String? = nil, file: String = #fileID, line: UInt = #line
    ) -> KafkaError {
        let rd = RDKafkaErrorCode(err)
        let text = context.map { "\($0): \(rd.message)" } ?? rd.message
        return KafkaError(code: code, rdKafkaCode: rd, message: text, file: file, line: line)
    }
}

/// librdkafka's `rd_kafka_resp_err_t` as a Swift value with named constants.
public struct RDKafkaErrorCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }
    init(_ err: rd_kafka_resp_err_t) { self.rawValue = err.rawValue }

    package var cValue: rd_kafka_resp_err_t { rd_kafka_resp_err_t(rawValue: rawValue) }

    public static let noError = RDKafkaErrorCode(RD_KAFKA_RESP_ERR_NO_ERROR)
    public static let partitionEOF = RDKafkaErrorCode(RD_KAFKA_RESP_ERR__PARTITION_EOF)
    public static let messageTimedOut = RDKafkaErrorCode(RD_KAFKA_RESP_ERR__MSG_TIMED_OUT)
    public static let queueFull = RDKafkaErrorCode(RD_KAFKA_RESP_ERR__QUEUE_FULL)
    public static let unknownTopic = RDKafkaErrorCode(RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC)
    public static let unknownPartition = RDKafkaErrorCode(RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION)
    public static let unknownTopicOrPartition = RDKafkaErrorCode(RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART)
    public static let noOffset = RDKafkaErrorCode(RD_KAFKA_RESP_ERR__NO_OFFSET)
    public static let allBrokersDown = RDKafkaErrorCode(RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN)
    public static let transport = RDKafkaErrorCode(RD_KAFKA_RESP_ERR__TRANSPORT)
    public static let notCoordinator = RDKafkaErrorCode(RD_KAFKA_RESP_ERR_NOT_COORDINATOR)
    public static let notLeaderForPartition = RDKafkaErrorCode(RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION)
    public static let requestTimedOut = RDKafkaErrorCode(RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT)
    public static let brokerNotAvailable = RDKafkaErrorCode(RD_KAFKA_RESP_ERR_BROKER_NOT_AVAILABLE)
    public static let notEnoughReplicas = RDKafkaErrorCode(RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS)
    public static let topicAuthorizationFailed = RDKafkaErrorCode(RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED)
    public static let state = RDKafkaErrorCode(RD_KAFKA_RESP_ERR__STATE)
    public static let fatal = RDKafkaErrorCode(RD_KAFKA_RESP_ERR__FATAL)
    /// A record larger than the topic's `max.message.bytes` (the broker) or `message.max.bytes` (the producer).
    public static let messageSizeTooLarge = RDKafkaErrorCode(RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE)
    public static let recordListTooLarge = RDKafkaErrorCode(RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE)

    /// librdkafka's symbolic name, e.g. `_MSG_TIMED_OUT`.
    public var name: String { String(cString: rd_kafka_err2name(cValue)) }
    /// librdkafka's human-readable text.
    public var message: String { String(cString: rd_kafka_err2str(cValue)) }
    public var description: String { name }

    /// Errors that a later attempt may not see (broker moves, time-outs, full queues).
    public var isRetryable: Bool {
        switch self {
        case .messageTimedOut, .queueFull, .allBrokersDown, .transport, .notCoordinator, .notLeaderForPartition,
            .requestTimedOut, .brokerNotAvailable, .notEnoughReplicas:
            return true
        default:
            return false
        }
    }
}
