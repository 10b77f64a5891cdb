import AsyncHTTPClient
import Foundation
import Fulfilment
import Logging
import NIOCore
import NIOHTTP1
import Wire

/// The App Store Server API over HTTPS (AsyncHTTPClient), each call signed with the studio's key
/// (``AppStoreToken``). Answers are read with limits: a history page of at most ``Limits/page`` bytes and
/// ``Limits/notifications`` notifications; anything else is `invalid_response`.
public final class AppStoreClient: AppStoreServerAPI {
    public enum Limits {
        public static let page = 8 << 20
        public static let notifications = 1_000
        public static let signedPayload = 65_536
        public static let errorBody = 4_096
    }

    /// Apple's production and sandbox hosts.
    public static let productionURL = "https://api.storekit.itunes.apple.com"
    public static let sandboxURL = "https://api.storekit-sandbox.itunes.apple.com"

    let baseURL: String
    let token: AppStoreToken
    let timeout: TimeAmount
    let client: HTTPClient
    let logger: Logger

    /// - Parameter baseURL: `refunds.apple.base_url` (Apple's host for the environment, or a simulator).
    public init(baseURL: String, key: AppStoreKey, timeout: Duration = .seconds(30), logger: Logger) {
        self.baseURL = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        self.token = AppStoreToken(key: key)
        self.timeout = .nanoseconds(max(1, timeout.clampedNanoseconds))
        // The call's deadline covers only the wait for the answer's head: a read timeout bounds a body that stalls.
        var configuration = HTTPClient.Configuration()
        configuration.timeout = HTTPClient.Configuration.Timeout(connect: .seconds(10), read: self.timeout)
        self.client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        self.logger = logger
    }

    /// Closes the connections. The client must not be used afterwards.
    public func shutdown() async {
        try? await client.shutdown()
    }

    public func notificationHistory(_ request: NotificationHistoryRequest) async throws(AppStoreError)
        -> NotificationHistoryPage
    {
        var body = ""
        JSONText.appendObject(to: &body) { object in
            object.integer("startDate", request.startDate.epochMilliseconds)
            object.integer("endDate", request.endDate.epochMilliseconds)
            object.string("notificationType", request.notificationType)
        }
        var url = baseURL + "/inApps/v1/notifications/history"
        if let page = request.paginationToken {
            guard let escaped = page.addingPercentEncoding(withAllowedCharacters: .alphanumerics) else {
                throw AppStoreError(.invalidRequest, "the pagination token cannot be sent")
            }
            url += "?paginationToken=" + escaped
        }
        let (status, bytes) = try await call(.POST, url, body: body, limit: Limits.page)
        guard status == 200 else { throw Self.failure(status, bytes, call: "Get Notification History") }
        return try Self.page(bytes)
    }

    public func sendConsumptionInformation(transactionId: String, _ information: ConsumptionInformation)
        async throws(AppStoreError)
    {
        guard !transactionId.isEmpty, transactionId.utf8.count <= 64,
            transactionId.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
        else {
            throw AppStoreError(.invalidRequest, "a transaction id is digits only")
        }
        var body = ""
        JSONText.appendObject(to: &body) { object in
            object.bool("customerConsented", information.customerConsented)
            object.string("deliveryStatus", information.deliveryStatus)
            object.bool("sampleContentProvided", information.sampleContentProvided)
            object.integer("consumptionPercentage", information.consumptionPercentage)
            object.string("refundPreference", information.refundPreference)
        }
        let (status, bytes) = try await call(
            .PUT, baseURL + "/inApps/v2/transactions/consumption/" + transactionId, body: body,
            limit: Limits.errorBody)
        guard (200...299).contains(status) else {
            throw Self.failure(status, bytes, call: "Send Consumption Information")
        }
    }

    // MARK: HTTP

    func call(_ method: HTTPMethod, _ url: String, body: String, limit: Int) async throws(AppStoreError)
        -> (Int, [UInt8])
    {
        let bearer: String
        do {
            bearer = try token.token()
        } catch {
            throw AppStoreError(.configuration, "the request could not be signed")
        }
        var request = HTTPClientRequest(url: url)
        request.method = method
        request.headers.add(name: "Authorization", value: "Bearer \(bearer)")
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(string: body))
        do {
            let response = try await client.execute(request, timeout: timeout, logger: logger)
            var buffer = try await response.body.collect(upTo: limit)
            return (Int(response.status.code), buffer.readBytes(length: buffer.readableBytes) ?? [])
        } catch is NIOTooManyBytesError {
            throw AppStoreError(.invalidResponse, "the answer is over \(limit) bytes")
        } catch {
            throw AppStoreError(.unavailable, "the App Store Server API did not answer: \(type(of: error))")
        }
    }

    /// The error of a status other than success, with Apple's `errorCode` when its body has one.
    static func failure(_ status: Int, _ bytes: [UInt8], call: String) -> AppStoreError {
        var code: Int64?
        var reader = JSONReader(bytes, maxDepth: 4)
        try? reader.readObject { reader, key throws(JSONReader.Failure) in
            if key == "errorCode" { code = try? reader.readInt64() } else { try reader.skipValue() }
        }
        switch status {
        case 401:
            return AppStoreError(
                .unauthorized, httpStatus: status, appleErrorCode: code,
                "\(call) refused the key (issuer id, key id, bundle id or the key itself)")
        case 429:
            return AppStoreError(.rateLimited, httpStatus: status, appleErrorCode: code, "\(call) is rate limited")
        case 500...599:
            return AppStoreError(.unavailable, httpStatus: status, appleErrorCode: code, "\(call) failed at Apple")
        default:
            return AppStoreError(.invalidRequest, httpStatus: status, appleErrorCode: code, "\(call) was refused")
        }
    }

    /// `{"notificationHistory":[{"signedPayload":…},…],"hasMore":…,"paginationToken":…}`.
    static func page(_ bytes: [UInt8]) throws(AppStoreError) -> NotificationHistoryPage {
        var payloads: [String] = []
        var hasMore = false
        var token: String?
        var reader = JSONReader(bytes, maxDepth: 8)
        do {
            try reader.readObject { reader, key throws(JSONReader.Failure) in
                switch key {
                case "notificationHistory":
                    try reader.readArray { reader throws(JSONReader.Failure) in
                        guard payloads.count < Limits.notifications else {
                            throw JSONReader.Failure(offset: 0, problem: "too many notifications")
                        }
                        var payload: String?
                        try reader.readObject { reader, key throws(JSONReader.Failure) in
                            if key == "signedPayload" {
                                payload = try reader.readString()
                            } else {
                                try reader.skipValue()
                            }
                        }
                        guard let payload, payload.utf8.count <= Limits.signedPayload else {
                            throw JSONReader.Failure(offset: 0, problem: "a notification without its signedPayload")
                        }
                        payloads.append(payload)
                    }
                case "hasMore": hasMore = try reader.readBool()
                case "paginationToken": token = try reader.readOptionalString()
                default: try reader.skipValue()
                }
            }
            try reader.finish()
        } catch {
            throw AppStoreError(
                .invalidResponse, "the notification history is not the documented JSON: \(error.problem)")
        }
        if hasMore, token?.isEmpty ?? true {
            throw AppStoreError(.invalidResponse, "the notification history has more pages but no paginationToken")
        }
        return NotificationHistoryPage(signedPayloads: payloads, hasMore: hasMore, paginationToken: token)
    }
}
