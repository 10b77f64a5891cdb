import CRdKafka
import Logging
import Synchronization

/// Owns one librdkafka handle (`rd_kafka_t`) and the context its callbacks reach through the opaque pointer.
///
/// - Important: The context is retained for as long as the handle lives: it is released in `deinit`, after
///   `rd_kafka_destroy` has returned, so no callback can run against a freed context.
///   Thread-safe: librdkafka handles may be used from any thread; the context's mutable parts are behind mutexes.
package final class RDKafkaClient: @unchecked Sendable {
    package let handle: OpaquePointer
    let context: RDKafkaClientContext
    private let contextPointer: UnsafeMutableRawPointer

    package init(
        type: rd_kafka_type_t,
        configuration: KafkaConfiguration,
        context: RDKafkaClientContext,
        configure: (OpaquePointer) -> Void = { _ in }
    ) throws(KafkaError) {
        let conf = rd_kafka_conf_new()!
        for (key, value) in configuration.properties.sorted(by: { $0.key < $1.key }) {
            if let error = Self.set(conf, key, value) {
                rd_kafka_conf_destroy(conf)
                throw error
            }
        }
        let pointer = Unmanaged.passRetained(context).toOpaque()
        rd_kafka_conf_set_opaque(conf, pointer)
        rd_kafka_conf_set_log_cb(conf) { rk, level, facility, message in
            guard let rk, let opaque = rd_kafka_opaque(rk) else { return }
            let context = Unmanaged<RDKafkaClientContext>.fromOpaque(opaque).takeUnretainedValue()
            context.log(
                level: level, facility: facility.map { String(cString: $0) } ?? "",
                message: message.map { String(cString: $0) } ?? "")
        }
        rd_kafka_conf_set_error_cb(conf) { rk, err, reason, opaque in
            guard let rk, let opaque else { return }
            let context = Unmanaged<RDKafkaClientContext>.fromOpaque(opaque).takeUnretainedValue()
            context.clientError(rk: rk, err: err, reason: reason.map { String(cString: $0) } ?? "")
        }
        rd_kafka_conf_set_stats_cb(conf) { _, json, length, opaque in
            guard let json, let opaque else { return 0 }
            let context = Unmanaged<RDKafkaClientContext>.fromOpaque(opaque).takeUnretainedValue()
            let bytes = UnsafeRawBufferPointer(start: json, count: length)
            context.statisticsArrived(Array(bytes))
            return 0  // librdkafka frees the JSON
        }
        configure(conf)

        var errstr = [CChar](repeating: 0, count: 512)
        guard let handle = rd_kafka_new(type, conf, &errstr, errstr.count) else {
            // On failure the configuration is still ours.
            rd_kafka_conf_destroy(conf)
            Unmanaged<RDKafkaClientContext>.fromOpaque(pointer).release()
            throw KafkaError(code: .clientCreation, message: String(errorBuffer: errstr))
        }
        self.handle = handle
        self.context = context
        self.contextPointer = pointer
    }

    /// Set by ``keepHandleAtDeinit()``.
    private let keepHandle = Atomic<Bool>(false)

    deinit {
        if keepHandle.load(ordering: .acquiring) {
            // The handle and its context stay alive (and reachable, so leak checkers see no leak) until exit.
            KeptHandles.keep(handle: handle, context: contextPointer)
            return
        }
        // Never librdkafka's own consumer close here: a consumer this code closed has left its group already (its
        // poll thread calls rd_kafka_consumer_close), and one it did not close must not serve callbacks into an object
        // being torn down — nor wait on a broker for it: with librdkafka 2.16 against Tansu that close, called from
        // rd_kafka_destroy, was seen to wait for ever. The group times such a member out instead.
        rd_kafka_destroy_flags(handle, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE)
        Unmanaged<RDKafkaClientContext>.fromOpaque(contextPointer).release()
    }

    /// Skips `rd_kafka_destroy` when this client goes away: for a closed consumer that a known librdkafka bug
    /// would abort in it (see `Librdkafka.assignorStateBugApplies`).
    func keepHandleAtDeinit() {
        keepHandle.store(true, ordering: .releasing)
    }

    /// The client's name as librdkafka reports it (e.g. `rdkafka#consumer-1`).
    var name: String { String(cString: rd_kafka_name(handle)) }

    /// librdkafka's fatal error, if one was raised.
    func fatalError() -> KafkaError? {
        var errstr = [CChar](repeating: 0, count: 512)
        let err = rd_kafka_fatal_error(handle, &errstr, errstr.count)
        guard err != RD_KAFKA_RESP_ERR_NO_ERROR else { return nil }
        return KafkaError(
            code: .consume, rdKafkaCode: RDKafkaErrorCode(err), message: String(errorBuffer: errstr), isFatal: true,
            isRetryable: false)
    }

    private static func set(_ conf: OpaquePointer, _ key: String, _ value: String) -> KafkaError? {
        var errstr = [CChar](repeating: 0, count: 512)
        guard rd_kafka_conf_set(conf, key, value, &errstr, errstr.count) != RD_KAFKA_CONF_OK else { return nil }
        // librdkafka quotes the rejected value; a secret's value must not reach logs, so its message is replaced.
        let message =
            KafkaConfiguration.isSecret(key)
            ? "invalid value for configuration property \"\(key)\"" : String(errorBuffer: errstr)
        return KafkaError(code: .configuration, message: message)
    }
}

/// Handles deliberately never destroyed, with their retained contexts: kept reachable until the process exits.
enum KeptHandles {
    private struct Kept: @unchecked Sendable {
        // @unchecked: opaque librdkafka pointers that nothing uses again; they are only held.
        let handle: OpaquePointer
        let context: UnsafeMutableRawPointer
    }
    private static let kept = Mutex<[Kept]>([])

    static func keep(handle: OpaquePointer, context: UnsafeMutableRawPointer) {
        kept.withLock { $0.append(Kept(handle: handle, context: context)) }
    }

    /// Whether `handle` was kept rather than destroyed.
    static func holds(handle: OpaquePointer) -> Bool {
        kept.withLock { $0.contains { $0.handle == handle } }
    }
}

/// What librdkafka's callbacks reach: logging, error and statistics sinks.
package final class RDKafkaClientContext: Sendable {
    let logger: Logger
    private let latestStatistics = Mutex<KafkaStatistics?>(nil)
    /// Set by a consumer once it exists; rebalances before that use librdkafka's default handling.
    let rebalanceTarget = Mutex<RebalanceTarget?>(nil)
    private let onStatistics: (@Sendable (KafkaStatistics) -> Void)?
    /// Where a broker this client cannot speak to is reported (shared by the process's clients).
    let problems: BrokerProblemReporter

    package init(
        logger: Logger, onStatistics: (@Sendable (KafkaStatistics) -> Void)? = nil,
        problems: BrokerProblemReporter = .shared
    ) {
        self.logger = logger
        self.onStatistics = onStatistics
        self.problems = problems
    }

    var statistics: KafkaStatistics? { latestStatistics.withLock { $0 } }

    func log(level: Int32, facility: String, message: String) {
        // syslog levels: 0 emerg … 3 err, 4 warning, 5 notice, 6 info, 7 debug
        var swiftLevel: Logger.Level =
            switch level {
            case ...3: .error
            case 4: .warning
            case 5, 6: .info
            default: .debug
            }
        if level <= 4, let problem = KafkaBrokerProblem.recognise(message) {
            // One line of ours says it, once a minute; librdkafka's own, on every reconnect, are for debugging.
            problems.report(problem, logger: logger)
            swiftLevel = .debug
        }
        logger.log(level: swiftLevel, "\(message)", metadata: ["kafka.facility": "\(facility)"])
    }

    func clientError(rk: OpaquePointer, err: Int32, reason: String) {
        let code = RDKafkaErrorCode(rawValue: err)
        if code == .fatal {
            logger.critical("librdkafka fatal error", metadata: ["kafka.error": "\(reason)"])
        } else if let problem = KafkaBrokerProblem.recognise(reason) {
            problems.report(problem, logger: logger)
            logger.debug("librdkafka error", metadata: ["kafka.error": "\(reason)", "kafka.code": "\(code.name)"])
        } else if code == .allBrokersDown, problems.current() != nil {
            // The consequence of the problem just reported, not news.
            logger.debug("librdkafka error", metadata: ["kafka.error": "\(reason)", "kafka.code": "\(code.name)"])
        } else {
            // Broker connection errors are retried by librdkafka itself; they are worth seeing, not acting on.
            logger.warning("librdkafka error", metadata: ["kafka.error": "\(reason)", "kafka.code": "\(code.name)"])
        }
    }

    /// A broker this process's clients reach but cannot speak to, met in the last two minutes (see
    /// ``KafkaBrokerProblem``).
    var brokerProblem: KafkaBrokerProblem? { problems.current() }

    func statisticsArrived(_ json: [UInt8]) {
        guard let statistics = KafkaStatistics(json: json) else {
            logger.debug("unparseable librdkafka statistics")
            return
        }
        latestStatistics.withLock { $0 = statistics }
        onStatistics?(statistics)
    }
}

extension String {
    /// The text librdkafka wrote into an error buffer, up to its terminating NUL.
    package init(errorBuffer buffer: [CChar]) {
        let bytes = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        self = String(decoding: bytes, as: UTF8.self)
    }
}
