import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle
import SimulatorServer
import Wire
import _CryptoExtras

/// Google Play's Voided Purchases API and Google's OAuth 2.0 token endpoint, as far as the worker uses them, over real
/// HTTP and with Google's documented limits:
/// - `POST /token`: the JWT-bearer grant; the assertion must be RS256-signed by the service account's key (its `kid`),
///   `iss` the account, `aud` this endpoint, the `androidpublisher` scope, at most an hour long — otherwise 400
///   `invalid_grant`. The access token it gives lasts ``Configuration/tokenLifetime``.
/// - `GET /androidpublisher/v3/applications/{package}/purchases/voidedpurchases`: a valid bearer token (else 401);
///   only the last 30 days whatever `startTime` says; `type` 0 leaves subscriptions out; partial refunds only with
///   `includeQuantityBasedPartialRefund=true`; at most `maxResults` (≤ 1,000) a page, the earliest void first, a
///   `token` bound to its query; 6,000 queries a day and 30 in any 30 seconds, then 429 with `Retry-After`.
public final class GooglePlaySimulator: Service {
    public struct Configuration: Sendable {
        public var host: String
        /// 0 picks a free port.
        public var port: Int
        /// Entries per page when the request asks for more (the API's own bound is 1,000).
        public var pageSize: Int
        public var tokenLifetime: TimeInterval

        public init(
            host: String = "127.0.0.1", port: Int = 0, pageSize: Int = 1_000, tokenLifetime: TimeInterval = 3_599
        ) {
            self.host = host
            self.port = port
            self.pageSize = pageSize
            self.tokenLifetime = tokenLifetime
        }
    }

    public let configuration: Configuration
    public let state: GooglePlaySimulatorState
    private let logger: Logger
    private let server: SimulatorServer

    public init(configuration: Configuration, state: GooglePlaySimulatorState, logger: Logger) {
        self.configuration = configuration
        self.state = state
        self.logger = logger
        self.server = SimulatorServer(host: configuration.host, port: configuration.port, name: "Google Play simulator")
    }

    public func run() async throws {
        try await server.run(logger: logger) { [self] request, _ in try await respond(to: request) }
    }

    /// The port it listens on; waits until it does.
    public func port() async -> Int { await server.port() }

    /// `http://host:port`, once listening.
    public func baseURL() async -> String { await server.baseURL() }
    /// The token endpoint a service account's `token_uri` names.
    public func tokenURI() async -> String { await baseURL() + "/token" }

    // MARK: Answers

    func respond(to request: Request) async throws -> Response {
        let path = request.uri.path
        if request.method == .post, path == "/admin/voided" { return try await addVoided(request) }
        if request.method == .post, path == "/token" { return try await token(request) }
        let prefix = "/androidpublisher/v3/applications/"
        let suffix = "/purchases/voidedpurchases"
        guard request.method == .get, path.hasPrefix(prefix), path.hasSuffix(suffix) else {
            return Self.error(404, "NOT_FOUND", "not found")
        }
        let now = Date()
        guard let header = request.headers[.authorization], header.hasPrefix("Bearer "),
            state.isValid(token: String(header.dropFirst("Bearer ".count)), now: now)
        else {
            state.count("unauthorized")
            return Self.error(401, "UNAUTHENTICATED", "Request had invalid authentication credentials.")
        }
        let package = String(path.dropFirst(prefix.count).dropLast(suffix.count))
        guard package.removingPercentEncoding == state.packageName else {
            return Self.error(404, "NOT_FOUND", "No application was found for the given package name.")
        }
        if let status = state.nextFailure("list") {
            return Self.error(status, "INTERNAL", "injected failure")
        }
        guard state.admitListCall(now: now) else {
            state.count("rate_limited")
            var response = Self.error(429, "RESOURCE_EXHAUSTED", "Quota exceeded for the Voided Purchases API.")
            response.headers[HTTPField.Name("Retry-After")!] = "30"
            return response
        }
        state.count("list")
        let query = request.uri.queryParameters
        func millis(_ name: String) -> Int64?? {
            guard let text = query[Substring(name)] else { return .some(nil) }
            guard let value = Int64(text), value >= 0 else { return nil }
            return .some(value)
        }
        guard let startGiven = millis("startTime"), let endGiven = millis("endTime") else {
            return Self.error(400, "INVALID_ARGUMENT", "startTime and endTime are milliseconds since the epoch")
        }
        let nowMillis = now.epochMilliseconds
        let end = endGiven ?? nowMillis
        // Older voids are never listed, whatever startTime says.
        let start = max(startGiven ?? 0, nowMillis - GooglePlaySimulatorState.historyDays * 86_400_000)
        guard (startGiven ?? start) <= end else {
            return Self.error(400, "INVALID_ARGUMENT", "startTime must not be after endTime")
        }
        let maxResults = query["maxResults"].flatMap { Int($0) } ?? 1_000
        guard (1...1_000).contains(maxResults) else {
            return Self.error(400, "INVALID_ARGUMENT", "maxResults must be between 1 and 1000")
        }
        let subscriptions = query["type"] == "1"
        let partials = query["includeQuantityBasedPartialRefund"] == "true"
        let fingerprint = "\(startGiven.map(String.init) ?? "-")|\(end)|\(subscriptions)|\(partials)"
        var offset = 0
        let sentToken = query["token"].map(String.init)
        if let token = sentToken {
            guard let parsed = Self.offset(of: token, query: fingerprint) else {
                return Self.error(400, "INVALID_ARGUMENT", "Invalid pagination token.")
            }
            offset = parsed
        }
        let matching = state.voided(
            from: Date(timeIntervalSince1970: Double(start) / 1_000),
            to: Date(timeIntervalSince1970: Double(end) / 1_000), subscriptions: subscriptions, partials: partials)
        let page = matching.dropFirst(offset).prefix(min(maxResults, configuration.pageSize))
        let next = offset + page.count
        var text = ""
        JSONText.appendObject(to: &text) { object in
            if next < matching.count {
                var pagination = ""
                let nextToken =
                    state.repeatsPageTokens
                    ? sentToken ?? Self.token(offset: next, query: fingerprint)
                    : Self.token(offset: next, query: fingerprint)
                JSONText.appendObject(to: &pagination) { inner in inner.string("nextPageToken", nextToken) }
                object.raw("tokenPagination", pagination)
            }
            if !page.isEmpty { object.raw("voidedPurchases", "[" + page.map(\.json).joined(separator: ",") + "]") }
        }
        return Self.json(200, text)
    }

    /// The JWT-bearer grant.
    func token(_ request: Request) async throws -> Response {
        if let status = state.nextFailure("token") { return Self.oauthError(status, "internal_failure", "injected") }
        let body = try await request.body.collect(upTo: 1 << 16)
        var form: [String: String] = [:]
        for pair in String(buffer: body).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            guard parts.count == 2 else { continue }
            form[String(parts[0])] = String(parts[1]).removingPercentEncoding
        }
        guard form["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer", let assertion = form["assertion"]
        else {
            state.count("token_refused")
            return Self.oauthError(400, "unsupported_grant_type", "Invalid grant_type.")
        }
        let now = Date()
        guard await verify(assertion, now: now) else {
            state.count("token_refused")
            return Self.oauthError(400, "invalid_grant", "Invalid JWT Signature.")
        }
        state.count("token")
        var text = ""
        JSONText.appendObject(to: &text) { object in
            object.string("access_token", state.issueToken(now: now, lifetime: configuration.tokenLifetime))
            object.integer("expires_in", Int64(configuration.tokenLifetime))
            object.string("token_type", "Bearer")
        }
        return Self.json(200, text)
    }

    /// Whether the assertion is RS256-signed by the account's key, for this endpoint and scope, valid now, at most an
    /// hour long.
    func verify(_ assertion: String, now: Date) async -> Bool {
        let parts = assertion.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = Base64URL.decode(parts[0].utf8),
            let claimBytes = Base64URL.decode(parts[1].utf8), let signatureBytes = Base64URL.decode(parts[2].utf8),
            let header = SimulatorJSON.members(headerBytes), let claims = SimulatorJSON.members(claimBytes)
        else { return false }
        let signed = Array("\(parts[0]).\(parts[1])".utf8)
        guard
            state.publicKey.isValidSignature(
                _RSA.Signing.RSASignature(rawRepresentation: signatureBytes), for: SHA256.hash(data: signed),
                padding: .insecurePKCS1v1_5)
        else { return false }
        let audience = await tokenURI()
        guard header["alg"] == #""RS256""#, header["kid"] == "\"\(state.keyId)\"",
            claims["iss"] == "\"\(state.clientEmail)\"", claims["aud"] == "\"\(audience)\"",
            let scope = claims["scope"], scope.contains("https://www.googleapis.com/auth/androidpublisher"),
            let issued = claims["iat"].flatMap(Int64.init), let expires = claims["exp"].flatMap(Int64.init)
        else { return false }
        let seconds = Int64(now.timeIntervalSince1970)
        return issued <= seconds + 60 && expires > seconds && expires - issued <= 3_600
    }

    /// For people trying the worker by hand (`iap-dev google-play-sim`): `POST /admin/voided` with `{"orderId": …,
    /// "purchaseToken": …}` (`voidedQuantity`, `voidedReason` optional) voids a purchase now and answers the RTDN Google
    /// sends for it. Unauthenticated: a test rig, served on loopback by default.
    func addVoided(_ request: Request) async throws -> Response {
        let body = try await request.body.collect(upTo: 1 << 16)
        guard let members = SimulatorJSON.members(Array(body.readableBytesView)),
            let orderId = members["orderId"].flatMap(SimulatorJSON.string), !orderId.isEmpty,
            let token = members["purchaseToken"].flatMap(SimulatorJSON.string), !token.isEmpty
        else {
            return Self.error(400, "INVALID_ARGUMENT", "give {\"orderId\": …, \"purchaseToken\": …}")
        }
        let quantity = members["voidedQuantity"].flatMap { Int($0) }
        let voided = GooglePlaySimulatorState.Voided(
            orderId: orderId, purchaseToken: token, voidedTime: Date(),
            voidedReason: members["voidedReason"].flatMap { Int($0) } ?? 1,
            voidedQuantity: quantity.flatMap { $0 > 0 ? $0 : nil })
        state.add(voided)
        return Self.json(201, voided.rtdn(packageName: state.packageName))
    }

    static func token(offset: Int, query: String) -> String {
        Base64URL.encode(Array("\(offset)|\(SHA256.hex(query))".utf8))
    }

    static func offset(of token: String, query: String) -> Int? {
        guard let bytes = Base64URL.decode(token.utf8) else { return nil }
        let parts = String(decoding: bytes, as: UTF8.self).split(separator: "|")
        guard parts.count == 2, parts[1] == SHA256.hex(query), let offset = Int(parts[0]), offset >= 0 else {
            return nil
        }
        return offset
    }

    static func json(_ status: Int, _ text: String) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        return Response(
            status: HTTPResponse.Status(code: status), headers: headers,
            body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    /// Google's API error body.
    static func error(_ status: Int, _ name: String, _ message: String) -> Response {
        var inner = ""
        JSONText.appendObject(to: &inner) { object in
            object.integer("code", Int64(status))
            object.string("message", message)
            object.string("status", name)
        }
        return json(status, "{\"error\":\(inner)}")
    }

    /// The OAuth token endpoint's error body.
    static func oauthError(_ status: Int, _ error: String, _ description: String) -> Response {
        var text = ""
        JSONText.appendObject(to: &text) { object in
            object.string("error", error)
            object.string("error_description", description)
        }
        return json(status, text)
    }
}
