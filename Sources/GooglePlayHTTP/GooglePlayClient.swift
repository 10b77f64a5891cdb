import AsyncHTTPClient
import Foundation
import Fulfilment
import Logging
import NIOCore
import NIOHTTP1
import Synchronization
import Wire

/// Google Play's Voided Purchases API over HTTPS (AsyncHTTPClient), authorised by a service account: an access token
/// from the OAuth 2.0 JWT-bearer grant, cached and renewed five minutes before it expires, never logged. Each page asks
/// for in-app purchases and subscriptions (`type=1`) with quantity-based partial refunds
/// (`includeQuantityBasedPartialRefund=true`), at most 1,000 entries. Answers are read with limits (a page of at most
/// ``Limits/page`` bytes and ``Limits/entries`` entries, a next page's token of printable ASCII that is not the one
/// just sent); anything else is `invalid_response`. An entry is handed on as it came: its reader refuses a bad one
/// alone.
public final class GooglePlayClient: VoidedPurchasesAPI {
    public enum Limits {
        public static let page = 8 << 20
        public static let entries = 1_000
        public static let tokenAnswer = 16_384
    }

    /// Google's API host.
    public static let productionURL = "https://androidpublisher.googleapis.com"
    /// A token this close to its expiry is replaced.
    static let renewal: TimeInterval = 300

    let baseURL: String
    let packageName: String
    let account: GoogleServiceAccount
    let timeout: TimeAmount
    let client: HTTPClient
    let logger: Logger
    let now: @Sendable () -> Date
    private let cached = Mutex<(token: String, expires: Date)?>(nil)

    /// - Parameter baseURL: `refunds.google.base_url` (Google's host, or a simulator).
    public init(
        baseURL: String = GooglePlayClient.productionURL, packageName: String, account: GoogleServiceAccount,
        timeout: Duration = .seconds(30), logger: Logger, now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.baseURL = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        self.packageName = packageName
        self.account = account
        self.timeout = .nanoseconds(max(1, timeout.clampedNanoseconds))
        var configuration = HTTPClient.Configuration()
        configuration.timeout = HTTPClient.Configuration.Timeout(connect: .seconds(10), read: self.timeout)
        configuration.redirectConfiguration = .disallow
        self.client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        self.logger = logger
        self.now = now
    }

    /// Closes the connections. The client must not be used afterwards.
    public func shutdown() async {
        try? await client.shutdown()
    }

    public func voidedPurchases(_ request: VoidedPurchasesRequest) async throws(StoreHistoryError)
        -> VoidedPurchasesPage
    {
        guard let package = packageName.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) else {
            throw StoreHistoryError(.failed, result: "configuration", "the package name cannot be sent")
        }
        var url =
            "\(baseURL)/androidpublisher/v3/applications/\(package)/purchases/voidedpurchases"
            + "?startTime=\(request.startTime.epochMilliseconds)&endTime=\(request.endTime.epochMilliseconds)"
            + "&maxResults=\(Limits.entries)&type=1&includeQuantityBasedPartialRefund=true"
        if let token = request.pageToken {
            guard let escaped = token.addingPercentEncoding(withAllowedCharacters: .alphanumerics) else {
                throw StoreHistoryError(.pageTokenRefused, result: "invalid_request", "the page token cannot be sent")
            }
            url += "&token=" + escaped
        }
        let bearer = try await accessToken()
        var call = HTTPClientRequest(url: url)
        call.headers.add(name: "Authorization", value: "Bearer \(bearer)")
        let (status, headers, bytes) = try await execute(call, limit: Limits.page, what: "the Voided Purchases API")
        switch status {
        case 200:
            let page = try Self.page(bytes)
            // A token that leads back to the page asked for would read the window for ever.
            if let next = page.nextPageToken, next == request.pageToken {
                throw StoreHistoryError(
                    .failed, result: "invalid_response", "the next page's token is the one just sent")
            }
            return page
        case 401:
            // A token Google no longer takes (revoked, or the account's key deleted): the next call asks for a new one.
            cached.withLock { $0 = nil }
            throw StoreHistoryError(
                .failed, result: "unauthorized", "the Voided Purchases API refused the access token (HTTP 401)")
        case 403:
            throw StoreHistoryError(
                .failed, result: "unauthorized",
                "the service account may not read this app's voided purchases (HTTP 403: grant it View financial data in Play Console, and enable the Google Play Android Developer API)"
            )
        case 429:
            throw StoreHistoryError(
                .quota(retryAfter: Self.retryAfter(headers)), result: "rate_limited",
                "the Voided Purchases API's quota is spent (HTTP 429)")
        case 500...599:
            throw StoreHistoryError(
                .failed, result: "unavailable", "the Voided Purchases API failed at Google (HTTP \(status))")
        default:
            let message = Self.errorMessage(bytes)
            if request.pageToken != nil {
                throw StoreHistoryError(
                    .pageTokenRefused, result: "invalid_request",
                    "the Voided Purchases API refused the request with its page token (HTTP \(status)): \(message)")
            }
            let kind: StoreHistoryError.Kind = message.contains("startTime") ? .startTooFarInPast : .failed
            throw StoreHistoryError(
                kind, result: "invalid_request",
                "the Voided Purchases API refused the request (HTTP \(status)): \(message)")
        }
    }

    // MARK: The access token

    /// An access token valid for at least ``renewal``: the cached one, or a new one from the token endpoint.
    func accessToken() async throws(StoreHistoryError) -> String {
        let now = now()
        if let cached = cached.withLock({ $0 }), cached.expires.timeIntervalSince(now) > Self.renewal {
            return cached.token
        }
        let assertion: String
        do {
            assertion = try account.assertion(issuedAt: now)
        } catch {
            throw StoreHistoryError(.failed, result: "configuration", "the token request could not be signed")
        }
        var request = HTTPClientRequest(url: account.tokenURI)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        request.body = .bytes(
            ByteBuffer(
                string: "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(assertion)"))
        let (status, headers, bytes) = try await execute(request, limit: Limits.tokenAnswer, what: "the token endpoint")
        switch status {
        case 200:
            break
        case 429:
            throw StoreHistoryError(
                .quota(retryAfter: Self.retryAfter(headers)), result: "rate_limited",
                "the token endpoint is rate limited (HTTP 429)")
        case 500...599:
            throw StoreHistoryError(.failed, result: "unavailable", "the token endpoint failed (HTTP \(status))")
        default:
            // invalid_grant and its kin: the key was deleted or disabled, the clock is off, the account is wrong.
            throw StoreHistoryError(
                .failed, result: "unauthorized",
                "the token endpoint refused the service account (HTTP \(status)): \(Self.oauthError(bytes))")
        }
        var token: String?
        var expiresIn: Int64?
        var reader = JSONReader(bytes, maxDepth: 4)
        do {
            try reader.readObject { reader, key throws(JSONReader.Failure) in
                switch key {
                case "access_token": token = try reader.readString()
                case "expires_in": expiresIn = try reader.readInt64()
                default: try reader.skipValue()
                }
            }
            try reader.finish()
        } catch {
            throw StoreHistoryError(.failed, result: "invalid_response", "the token answer is not JSON")
        }
        guard let token, !token.isEmpty, token.utf8.count <= 4_096,
            token.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F })
        else {
            throw StoreHistoryError(.failed, result: "invalid_response", "the token answer has no usable access_token")
        }
        // Google's tokens last an hour; an answer without a lifetime (or a silly one) is used once, then renewed.
        let lifetime = TimeInterval(min(max(expiresIn ?? 0, 0), 86_400))
        cached.withLock { $0 = (token, now.addingTimeInterval(lifetime)) }
        return token
    }

    // MARK: HTTP

    func execute(_ request: HTTPClientRequest, limit: Int, what: String) async throws(StoreHistoryError)
        -> (Int, HTTPHeaders, [UInt8])
    {
        do {
            let response = try await client.execute(request, timeout: timeout, logger: logger)
            var buffer = try await response.body.collect(upTo: limit)
            return (Int(response.status.code), response.headers, buffer.readBytes(length: buffer.readableBytes) ?? [])
        } catch is NIOTooManyBytesError {
            throw StoreHistoryError(.failed, result: "invalid_response", "\(what)'s answer is over \(limit) bytes")
        } catch {
            throw StoreHistoryError(.failed, result: "unavailable", "\(what) did not answer: \(type(of: error))")
        }
    }

    /// `Retry-After` in seconds, when it is one (at most a day).
    static func retryAfter(_ headers: HTTPHeaders) -> Duration? {
        guard let value = headers.first(name: "Retry-After"), let seconds = Int64(value), seconds >= 0 else {
            return nil
        }
        return .seconds(min(seconds, 86_400))
    }

    /// Google's error message (`{"error": {"code", "message", "status"}}`), one printable line of at most 200 bytes.
    static func errorMessage(_ bytes: [UInt8]) -> String {
        var message = ""
        var reader = JSONReader(bytes, maxDepth: 4)
        try? reader.readObject { reader, key throws(JSONReader.Failure) in
            guard key == "error" else { return try reader.skipValue() }
            try reader.readObject { reader, key throws(JSONReader.Failure) in
                if key == "message", let text = try reader.readStringOrSkip() {
                    message = text
                } else {
                    try reader.skipValue()
                }
            }
        }
        return printable(message)
    }

    /// The OAuth error of a refused token request (`{"error": "invalid_grant", "error_description": …}`).
    static func oauthError(_ bytes: [UInt8]) -> String {
        var parts: [String] = []
        var reader = JSONReader(bytes, maxDepth: 4)
        try? reader.readObject { reader, key throws(JSONReader.Failure) in
            if key == "error" || key == "error_description", let text = try reader.readStringOrSkip() {
                parts.append(text)
            } else {
                try reader.skipValue()
            }
        }
        return printable(parts.joined(separator: ": "))
    }

    static func printable(_ text: String) -> String {
        text.isEmpty ? "-" : OutsideText.printable(text, limit: 200)
    }

    /// `{"tokenPagination": {"nextPageToken": …}, "voidedPurchases": [{…}, …]}`.
    static func page(_ bytes: [UInt8]) throws(StoreHistoryError) -> VoidedPurchasesPage {
        var entries: [[UInt8]] = []
        var next: String?
        var reader = JSONReader(bytes, maxDepth: 64)
        do {
            try reader.readObject { reader, key throws(JSONReader.Failure) in
                switch key {
                case "voidedPurchases":
                    try reader.readArray { reader throws(JSONReader.Failure) in
                        guard entries.count < Limits.entries else {
                            throw JSONReader.Failure(offset: 0, problem: "more than \(Limits.entries) entries")
                        }
                        // Whatever an entry holds, its reader refuses it alone (kept, counted); the page goes on.
                        entries.append(Array(try reader.captureValue()))
                    }
                case "tokenPagination":
                    try reader.readObject { reader, key throws(JSONReader.Failure) in
                        if key == "nextPageToken" {
                            next = try reader.readOptionalString()
                        } else {
                            try reader.skipValue()
                        }
                    }
                default: try reader.skipValue()
                }
            }
            try reader.finish()
        } catch {
            throw StoreHistoryError(
                .failed, result: "invalid_response",
                "the voided purchases are not the documented JSON: \(error.problem)")
        }
        if next?.isEmpty == true { next = nil }
        if let token = next, token.utf8.count > 4_096 || !token.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) {
            throw StoreHistoryError(
                .failed, result: "invalid_response", "the next page's token is over 4 KiB or not printable ASCII")
        }
        return VoidedPurchasesPage(entries: entries, nextPageToken: next)
    }
}
