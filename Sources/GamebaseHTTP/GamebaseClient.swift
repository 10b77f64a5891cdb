import Foundation
import Gamebase
import Logging
import NIOCore
import NIOHTTP1
import NIOSSL
import Synchronization
import Wire

/// Called after every Gamebase request: the API, its outcome (`success`, `already_consumed`, `permanent`,
/// `configuration` or `transient`) and how long it took.
public typealias GamebaseRequestObserver = @Sendable (_ api: String, _ outcome: String, _ seconds: Double) -> Void

/// The Gamebase server API over HTTP/1.1 (``HTTP1ConnectionPool``), as the contract in `gamebase-server-api.md` says.
///
/// Every answer is judged by `header.isSuccessful`, never by the HTTP status alone; non-200 answers, bodies that
/// are not the JSON envelope, connection errors and timeouts are transient ``GamebaseError``s. The secret key and
/// access tokens never appear in errors or logs.
public final class GamebaseClient: GamebaseAPI {

    /// Nil when the base URL has no http(s) scheme or no host (the worker's configuration refuses such a URL at
    /// startup); every call then fails with a connection error.
    private let pool: HTTP1ConnectionPool?
    private let configuration: GamebaseConfiguration
    /// The secret key sent with every call; replaced by ``updateSecretKey(_:)`` (a rotated key).
    private let secretKey: Mutex<Secret>
    private let logger: Logger
    private let observer: GamebaseRequestObserver?
    /// The base URL's path (usually empty) and the app's prefix.
    private let appPath: String
    /// The paths of the two calls every purchase makes, built once.
    private let consumePath: String
    private let transactionPathPrefix: String
    private static let maxResponseBytes = 4 << 20
    private static let connectTimeoutSeconds: Int64 = 5

    public convenience init(
        configuration: GamebaseConfiguration, logger: Logger, observer: GamebaseRequestObserver? = nil
    ) {
        self.init(configuration: configuration, logger: logger, observer: observer, tls: nil)
    }

    /// - Parameter tls: for `https` base URLs; the default verifies the server against the system's trust roots.
    package init(
        configuration: GamebaseConfiguration, logger: Logger, observer: GamebaseRequestObserver?, tls: TLSConfiguration?
    ) {
        self.configuration = configuration
        self.secretKey = Mutex(configuration.secretKey)
        self.logger = logger
        self.observer = observer
        let base = URLComponents(string: configuration.baseURL)
        let scheme = base?.scheme?.lowercased()
        if let base, scheme == "http" || scheme == "https", let host = base.hostAsWritten, !host.isEmpty {
            let tlsOn = scheme == "https"
            // Redirects are never followed (one would carry X-Secret-Key to wherever it points): a 3xx is an error
            // like any other non-200 answer.
            pool = HTTP1ConnectionPool(
                origin: .init(tls: tlsOn, host: host, port: base.port ?? (tlsOn ? 443 : 80)),
                maxConnections: configuration.maxConnections, connectTimeout: .seconds(Self.connectTimeoutSeconds),
                maxBodyBytes: Self.maxResponseBytes,
                tls: tls)
        } else {
            pool = nil
        }
        // GamebaseConfiguration drops a trailing slash, so a base path (a gateway prefix) is "" or "/prefix".
        appPath = "\(base?.percentEncodedPath ?? "")/tcgb-inapp/v1.3/apps/\(Self.percentEncoded(configuration.appID))"
        consumePath = "\(appPath)/consume"
        transactionPathPrefix = "\(appPath)/payment/transaction?accessToken="
    }

    /// Sends `key` from the next call on (a key rotated at the console and then in the mounted secret).
    public func updateSecretKey(_ key: Secret) {
        secretKey.withLock { $0 = key }
    }

    /// The longest a health probe waits for its answer: a probe that hangs must not hold up the next one.
    static let probeTimeoutMilliseconds = 2_000

    public func probe(transactionID: GamebaseTransactionID) async -> GamebaseProbeVerdict {
        let api = GamebaseAPIName.healthProbe
        let url = "\(appPath)/payment/transaction?accessToken=\(Self.percentEncoded(GamebaseProbeVerdict.probeToken))"
        do {
            let envelope = try await call(
                api: api, method: .GET, url: url, body: nil,
                timeoutMilliseconds: min(configuration.timeoutMilliseconds, Self.probeTimeoutMilliseconds),
                transactionID: transactionID, result: PaymentTransaction.read)
            guard let result = envelope.result else {
                return .unavailable(failure(api, .invalidResponse, transactionID, "successful answer without a result"))
            }
            return GamebaseProbeVerdict(.success(result))
        } catch {
            return GamebaseProbeVerdict(.failure(error))
        }
    }

    /// Closes the idle connections; calls under way finish. Call once, when the client is no longer used.
    public func shutdown() async throws {
        pool?.shutdown()
    }

    public func paymentTransaction(accessToken: String, transactionID: GamebaseTransactionID)
        async throws(GamebaseError)
        -> PaymentTransaction
    {
        let api = GamebaseAPIName.paymentTransaction
        guard !accessToken.isEmpty else {
            throw GamebaseError(
                code: .invalidRequest, api: api, transactionID: transactionID.value, message: "empty access token")
        }
        let token = Self.percentEncoded(accessToken)
        var url = ""
        url.reserveCapacity(transactionPathPrefix.utf8.count + token.utf8.count)
        url += transactionPathPrefix
        url += token
        let envelope = try await call(
            api: api, method: .GET, url: url, body: nil, timeoutMilliseconds: configuration.timeoutMilliseconds,
            transactionID: transactionID, result: PaymentTransaction.read)
        guard let result = envelope.result else {
            throw failure(api, .invalidResponse, transactionID, "successful answer without a result")
        }
        return result
    }

    public func consume(paymentSeq: String, accessToken: String, transactionID: GamebaseTransactionID)
        async throws(GamebaseError)
        -> ConsumeOutcome
    {
        let api = GamebaseAPIName.consume
        guard !accessToken.isEmpty, !paymentSeq.isEmpty else {
            throw GamebaseError(
                code: .invalidRequest, api: api, transactionID: transactionID.value,
                message: "empty paymentSeq or access token")
        }
        // Written by hand: JSONEncoder cost a dozen allocations per purchase here.
        var text = ""
        text.reserveCapacity(48 + paymentSeq.utf8.count + accessToken.utf8.count)
        JSONText.appendObject(to: &text) { object in
            object.string("paymentSeq", paymentSeq)
            object.string("accessToken", accessToken)
        }
        let body = ByteBuffer(string: text)
        do {
            let envelope = try await call(
                api: api, method: .POST, url: consumePath, body: body,
                timeoutMilliseconds: configuration.consumeTimeoutMilliseconds, transactionID: transactionID,
                result: ConsumeResult.read)
            return .consumed(envelope.result ?? ConsumeResult())
        } catch  where error.resultCode == .alreadyConsumed {
            return .alreadyConsumed
        }
    }

    public func listConsumables(userId: String, marketIds: [String]?, transactionID: GamebaseTransactionID)
        async throws(GamebaseError)
        -> [ConsumableItem]
    {
        struct Body: Encodable {
            var userId: String
            var marketIds: [String]?
        }
        let body = (try? JSONEncoder().encode(Body(userId: userId, marketIds: marketIds))).map { ByteBuffer(bytes: $0) }
        let envelope = try await call(
            api: GamebaseAPIName.consumable, method: .POST, url: "\(appPath)/consumable", body: body,
            timeoutMilliseconds: configuration.timeoutMilliseconds, transactionID: transactionID,
            result: ConsumableItem.readList)
        return envelope.result ?? []
    }

    /// Reads a Get Payment Transaction answer as the client does (for benchmarks that bring their own transport):
    /// the payment, or nil for a refusal.
    /// - Throws: `JSONReader.Failure` for a body that is not the envelope.
    package static func readPaymentAnswer(_ body: [UInt8]) throws -> PaymentTransaction? {
        let envelope = try GamebaseEnvelope.read(body, result: PaymentTransaction.read)
        return envelope.header.isSuccessful ? envelope.result : nil
    }

    // MARK: Transport

    private func call<Result>(
        api: String, method: HTTPMethod, url: String, body: ByteBuffer?, timeoutMilliseconds: Int,
        transactionID: GamebaseTransactionID, result: (inout JSONReader) throws(JSONReader.Failure) -> Result
    ) async throws(GamebaseError) -> GamebaseEnvelope<Result> {
        let started = ContinuousClock.now
        do {
            let envelope = try await send(
                api: api, method: method, url: url, body: body, timeoutMilliseconds: timeoutMilliseconds,
                transactionID: transactionID, result: result)
            record(
                api, outcome: "success", since: started, transactionID: transactionID,
                resultCode: envelope.header.resultCode)
            return envelope
        } catch {
            record(
                api,
                outcome: error.resultCode == .alreadyConsumed
                    ? GamebaseFailureKind.alreadyConsumed.rawValue : error.kind.rawValue,
                since: started, transactionID: transactionID, resultCode: error.resultCode?.rawValue, error: error)
            throw error
        }
    }

    private func send<Result>(
        api: String, method: HTTPMethod, url: String, body: ByteBuffer?, timeoutMilliseconds: Int,
        transactionID: GamebaseTransactionID, result: (inout JSONReader) throws(JSONReader.Failure) -> Result
    ) async throws(GamebaseError) -> GamebaseEnvelope<Result> {
        guard let pool else {
            // The worker's configuration refuses such a URL at startup; a caller that skipped it gets no answer.
            throw failure(api, .connection, transactionID, "the base URL is not an http:// or https:// URL with a host")
        }
        var head = HTTPRequestHead(version: .http1_1, method: method, uri: url)
        // Room for these three and the pool's Host and Content-Length, so adding them never grows the storage.
        head.headers.reserveCapacity(5)
        // The docs require the JSON content type on every call, GET included (contract §3.1).
        head.headers.add(name: "Content-Type", value: "application/json; charset=UTF-8")
        head.headers.add(name: "X-Secret-Key", value: secretKey.withLock { $0.revealed })
        head.headers.add(name: "X-TCGB-Transaction-Id", value: transactionID.value)

        let response: HTTP1Connection.Response
        do {
            response = try await pool.execute(
                head, body: body, timeout: .milliseconds(Int64(timeoutMilliseconds)))
        } catch HTTP1ConnectionPool.Failure.timeout {
            throw failure(api, .timeout, transactionID, "no answer within \(timeoutMilliseconds) ms")
        } catch ChannelError.connectTimeout {
            throw failure(api, .timeout, transactionID, "could not connect within \(Self.connectTimeoutSeconds) s")
        } catch HTTP1ConnectionPool.Failure.tooLarge {
            throw failure(
                api, .invalidResponse, transactionID, "the answer is larger than \(Self.maxResponseBytes) bytes")
        } catch let failure as HTTP1ConnectionPool.Failure {
            throw self.failure(api, .connection, transactionID, "request failed: \(failure)")
        } catch {
            throw failure(api, .connection, transactionID, "request failed: \(Self.describe(error))")
        }
        guard response.status == .ok else {
            throw GamebaseError(
                code: .httpStatus, api: api, httpStatus: Int(response.status.code), transactionID: transactionID.value,
                message: "HTTP \(response.status.code) instead of 200")
        }
        let envelope: GamebaseEnvelope<Result>
        do {
            envelope = try GamebaseEnvelope.read(Array(response.body.readableBytesView), result: result)
        } catch {
            // The problem names a position and a kind of error, never the body's text (it may hold a token).
            throw failure(api, .invalidResponse, transactionID, "the body is not the Gamebase JSON envelope (\(error))")
        }
        let header = envelope.header
        if header.isSuccessful != (header.resultCode == 0) {
            // Never documented; the contract says to trust isSuccessful (§8.3).
            warnHeaderDisagrees(api, resultCode: header.resultCode, transactionID: transactionID)
        }
        guard header.isSuccessful else {
            throw GamebaseError(
                code: .resultCode, api: api, resultCode: GamebaseResultCode(header.resultCode),
                resultMessage: header.resultMessage.map { Self.clipped($0, toUTF8Bytes: 200) },
                transactionID: transactionID.value,
                message: "Gamebase answered resultCode \(header.resultCode)")
        }
        return envelope
    }

    /// At most `limit` UTF-8 bytes of `text`, cut between scalars (one Character can hold any number of them).
    static func clipped(_ text: String, toUTF8Bytes limit: Int) -> String {
        guard text.utf8.count > limit else { return text }
        var scalars = String.UnicodeScalarView()
        var bytes = 0
        for scalar in text.unicodeScalars {
            bytes += UTF8.width(scalar)
            if bytes > limit { break }
            scalars.append(scalar)
        }
        return String(scalars)
    }

    private func failure(
        _ api: String, _ code: GamebaseError.Code, _ transactionID: GamebaseTransactionID, _ message: String
    )
        -> GamebaseError
    {
        GamebaseError(code: code, api: api, transactionID: transactionID.value, message: message)
    }

    /// Out of line for the reason `record` is.
    @inline(never)
    private func warnHeaderDisagrees(_ api: String, resultCode: Int, transactionID: GamebaseTransactionID) {
        logger.warning(
            "Gamebase header disagrees with itself",
            metadata: [
                "gamebase.api": "\(api)", "gamebase.result_code": "\(resultCode)",
                "gamebase.transaction_id": "\(transactionID)",
            ])
    }

    /// Never inlined: its log event and metadata would otherwise take room in the async frame of every call in flight,
    /// several times over (issue #39).
    @inline(never)
    private func record(
        _ api: String, outcome: String, since started: ContinuousClock.Instant, transactionID: GamebaseTransactionID,
        resultCode: Int?, error: GamebaseError? = nil
    ) {
        let elapsed = ContinuousClock.now - started
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        observer?(api, outcome, seconds)
        logger.debug(
            "Gamebase call",
            metadata: [
                "gamebase.api": "\(api)", "gamebase.outcome": "\(outcome)",
                "gamebase.transaction_id": "\(transactionID)",
                "gamebase.result_code": "\(resultCode.map(String.init) ?? "-")",
                "gamebase.duration_ms": "\(Int(seconds * 1000))",
                "gamebase.error": "\(error?.message ?? "")",
            ])
    }

    /// A transport error's type and case, never its associated values (which could hold the URL and so a token).
    private static func describe(_ error: any Error) -> String {
        let text = String(describing: error)
        let cut = text.firstIndex { $0 == "(" || $0 == ":" } ?? text.endIndex
        return "\(type(of: error)).\(text[..<cut])"
    }

    private static let hexDigits = Array("0123456789ABCDEF".utf8)
    private static let unreservedMarks = Array("-._~".utf8)

    /// Percent-encodes everything but RFC 3986's unreserved characters, so `/`, `+` and `=` survive the trip.
    /// Written over the UTF-8 bytes: it runs for every Get Payment Transaction call.
    static func percentEncoded(_ value: String) -> String {
        // Most tokens need no escaping: then the value is its own encoding, and nothing is copied.
        if value.utf8.allSatisfy({ $0.isASCIIAlphanumeric || Self.unreservedMarks.contains($0) }) { return value }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(value.utf8.count)
        for byte in value.utf8 {
            if byte.isASCIIAlphanumeric || Self.unreservedMarks.contains(byte) {
                bytes.append(byte)
            } else {
                bytes.append(UInt8(ascii: "%"))
                bytes.append(hexDigits[Int(byte >> 4)])
                bytes.append(hexDigits[Int(byte & 0x0F)])
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
