import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle
import SimulatorServer
import Wire

/// Apple's App Store Server API as far as the worker uses it, over real HTTP: Get Notification History (a window that
/// starts at most 180 days back in production, 30 in the sandbox, one type, pages of ``Configuration/pageSize`` with a pagination token bound to its query) and Send
/// Consumption Information (recorded, answered 202). Every call must carry a valid ES256 bearer token of the
/// configured key (issuer, key id, audience, bundle id, at most an hour long); anything else is answered 401, as Apple
/// does.
public final class AppStoreSimulator: Service {
    public struct Configuration: Sendable {
        public var host: String
        /// 0 picks a free port.
        public var port: Int
        public var issuerId: String
        public var keyId: String
        /// The public half of the studio's key, which signs the bearer tokens.
        public var publicKey: P256.Signing.PublicKey
        public var pageSize: Int
        /// How long a pagination token is taken after it was given out: later, Apple's PaginationTokenExpiredError
        /// (HTTP 400, errorCode 4000017). Apple does not publish its lifetime; a day by default.
        public var paginationTokenLifetime: TimeInterval

        public init(
            host: String = "127.0.0.1", port: Int = 0, issuerId: String, keyId: String,
            publicKey: P256.Signing.PublicKey, pageSize: Int = 20, paginationTokenLifetime: TimeInterval = 86_400
        ) {
            self.paginationTokenLifetime = paginationTokenLifetime
            self.host = host
            self.port = port
            self.issuerId = issuerId
            self.keyId = keyId
            self.publicKey = publicKey
            self.pageSize = pageSize
        }
    }

    public let configuration: Configuration
    public let state: AppStoreSimulatorState
    private let logger: Logger
    private let server: SimulatorServer

    public init(configuration: Configuration, state: AppStoreSimulatorState, logger: Logger) {
        self.configuration = configuration
        self.state = state
        self.logger = logger
        self.server = SimulatorServer(host: configuration.host, port: configuration.port, name: "App Store simulator")
    }

    public func run() async throws {
        try await server.run(logger: logger) { [self] request, _ in try await respond(to: request) }
    }

    /// The port it listens on; waits until it does.
    public func port() async -> Int { await server.port() }

    /// `http://host:port`, once listening.
    public func baseURL() async -> String { await server.baseURL() }

    // MARK: Answers

    func respond(to request: Request) async throws -> Response {
        let path = request.uri.path
        if path.hasPrefix("/admin/") { return try await admin(request) }
        let kind: String
        if request.method == .post, path == "/inApps/v1/notifications/history" {
            kind = "history"
        } else if request.method == .put, path.hasPrefix("/inApps/v2/transactions/consumption/") {
            kind = "consumption"
        } else {
            return Self.error(404, 4_040_000, "not found")
        }
        guard authorized(request.headers[.authorization]) else {
            state.count("unauthorized")
            return Response(status: .unauthorized)
        }
        state.count(kind)
        if let status = state.nextFailure(kind) {
            return Self.error(status, 5_000_000, "injected failure")
        }
        let body = try await request.body.collect(upTo: 1 << 16)
        let members = SimulatorJSON.members(Array(body.readableBytesView))
        if kind == "consumption" {
            let transactionId = String(path.dropFirst("/inApps/v2/transactions/consumption/".count))
            guard let members, members["customerConsented"] == "true" else {
                return Self.error(400, 4_000_129, "customerConsented must be true")
            }
            guard let status = members["deliveryStatus"], status.hasPrefix("\"") else {
                return Self.error(400, 4_000_130, "deliveryStatus is required")
            }
            state.record(
                AppStoreSimulatorState.ConsumptionCall(transactionId: transactionId, body: members, at: Date()))
            return Response(status: .accepted)
        }
        guard let members, let start = members["startDate"].flatMap(Int64.init),
            let end = members["endDate"].flatMap(Int64.init), let typeText = members["notificationType"],
            typeText.count > 2
        else {
            return Self.error(400, 4_000_006, "startDate, endDate and notificationType are required")
        }
        let type = String(typeText.dropFirst().dropLast())
        let now = Int64(Date().timeIntervalSince1970 * 1_000)
        // Apple's codes: StartDateAfterEndDateError, StartDateTooFarInPastError (the history kept: 180 days in
        // production, 30 in the sandbox).
        guard start < end else { return Self.error(400, 4_000_013, "startDate must be before endDate") }
        guard start >= now - state.historyDays * 86_400_000 else {
            return Self.error(400, 4_000_012, "startDate is earlier than \(state.historyDays) days ago")
        }
        let query = "\(start)|\(end)|\(type)"
        var offset = 0
        if let token = request.uri.queryParameters["paginationToken"].map(String.init) {
            guard let parsed = Self.offset(of: token, query: query) else {
                return Self.error(400, 4_000_014, "invalid pagination token")
            }
            guard parsed.issuedMilliseconds >= now - Int64(configuration.paginationTokenLifetime * 1_000) else {
                return Self.error(400, 4_000_017, "pagination token expired")
            }
            offset = parsed.offset
        }
        let matching = state.history(
            type: type, start: Date(timeIntervalSince1970: Double(start) / 1_000),
            end: Date(timeIntervalSince1970: Double(end) / 1_000))
        let page = matching.dropFirst(offset).prefix(configuration.pageSize)
        let next = offset + page.count
        var text = ""
        JSONText.appendObject(to: &text) { object in
            object.raw(
                "notificationHistory",
                "["
                    + page.map { #"{"signedPayload":"\#($0.signedPayload)"}"# }
                    .joined(separator: ",") + "]")
            object.bool("hasMore", next < matching.count)
            object.string(
                "paginationToken", next < matching.count ? Self.token(offset: next, query: query, issued: now) : nil)
        }
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    /// For people trying the worker by hand (`iap-dev app-store-sim`): `POST /admin/notifications` with
    /// `{"type": "REFUND", "transactionId": "…"}` adds a notification signed now (`revocationReason` optional);
    /// `GET /admin/consumptions` lists the consumption information received. Unauthenticated: a test rig, served on
    /// loopback by default.
    func admin(_ request: Request) async throws -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        switch (request.method, request.uri.path) {
        case (.post, "/admin/notifications"):
            let body = try await request.body.collect(upTo: 1 << 16)
            guard let members = SimulatorJSON.members(Array(body.readableBytesView)),
                let type = members["type"].flatMap(SimulatorJSON.string),
                let transactionId = members["transactionId"].flatMap(SimulatorJSON.string),
                ["REFUND", "REFUND_REVERSED", "REFUND_DECLINED", "CONSUMPTION_REQUEST"].contains(type)
            else {
                return Self.error(
                    400, 4_000_000,
                    "give {\"type\": REFUND, REFUND_REVERSED, REFUND_DECLINED or CONSUMPTION_REQUEST, \"transactionId\": …}"
                )
            }
            let now = Date()
            let notification = try state.addNotification(
                type: type, transactionId: transactionId, signedDate: now,
                revocationDate: type == "REFUND" ? now : nil,
                revocationReason: members["revocationReason"].flatMap { Int($0) } ?? (type == "REFUND" ? 1 : nil))
            var text = ""
            JSONText.appendObject(to: &text) { object in
                object.string("notificationUUID", notification.uuid)
                object.string("type", type)
            }
            return Response(status: .created, headers: headers, body: .init(byteBuffer: ByteBuffer(string: text)))
        case (.get, "/admin/consumptions"):
            var text = "["
            for (index, call) in state.consumptions.enumerated() {
                if index > 0 { text += "," }
                JSONText.appendObject(to: &text) { object in
                    object.string("transactionId", call.transactionId)
                    object.raw(
                        "body",
                        "{"
                            + call.body.filter { Self.isPlainName($0.key) }.sorted { $0.key < $1.key }
                            .map { "\"\($0.key)\":\($0.value)" }.joined(
                                separator: ",") + "}")
                }
            }
            text += "]"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: text)))
        default:
            return Self.error(404, 4_040_000, "not found")
        }
    }

    /// A member name written back as it came needs no escaping: printable ASCII without quotes or backslashes.
    static func isPlainName(_ name: String) -> Bool {
        name.utf8.allSatisfy { (0x20..<0x7F).contains($0) && $0 != 0x22 && $0 != 0x5C }
    }

    /// Whether `header` is `Bearer <JWT>` signed by the configured key, for this app, now valid for at most an hour.
    func authorized(_ header: String?) -> Bool {
        guard let header, header.hasPrefix("Bearer ") else { return false }
        let parts = header.dropFirst("Bearer ".count).split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = Base64URL.decode(parts[0].utf8),
            let claimBytes = Base64URL.decode(parts[1].utf8), let signatureBytes = Base64URL.decode(parts[2].utf8),
            let jwtHeader = SimulatorJSON.members(headerBytes), let claims = SimulatorJSON.members(claimBytes),
            let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureBytes)
        else { return false }
        let signed = Array("\(parts[0]).\(parts[1])".utf8)
        guard configuration.publicKey.isValidSignature(signature, for: signed) else { return false }
        guard jwtHeader["alg"] == #""ES256""#, jwtHeader["kid"] == "\"\(configuration.keyId)\"",
            claims["iss"] == "\"\(configuration.issuerId)\"", claims["aud"] == #""appstoreconnect-v1""#,
            claims["bid"] == "\"\(state.bundleId)\"", let issued = claims["iat"].flatMap(Int64.init),
            let expires = claims["exp"].flatMap(Int64.init)
        else { return false }
        let now = Int64(Date().timeIntervalSince1970)
        return issued <= now + 60 && expires > now && expires - issued <= 3_600
    }

    static func token(offset: Int, query: String, issued milliseconds: Int64) -> String {
        Base64URL.encode(Array("\(offset)|\(SHA256.hex(query))|\(milliseconds)".utf8))
    }

    static func offset(of token: String, query: String) -> (offset: Int, issuedMilliseconds: Int64)? {
        guard let bytes = Base64URL.decode(token.utf8) else { return nil }
        let parts = String(decoding: bytes, as: UTF8.self).split(separator: "|")
        guard parts.count == 3, parts[1] == SHA256.hex(query), let offset = Int(parts[0]), offset >= 0,
            let issued = Int64(parts[2])
        else { return nil }
        return (offset, issued)
    }

    static func error(_ status: Int, _ code: Int64, _ message: String) -> Response {
        var text = ""
        JSONText.appendObject(to: &text) { object in
            object.integer("errorCode", code)
            object.string("errorMessage", message)
        }
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        return Response(
            status: HTTPResponse.Status(code: status), headers: headers,
            body: .init(byteBuffer: ByteBuffer(string: text)))
    }
}
