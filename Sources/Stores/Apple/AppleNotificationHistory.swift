import Foundation
import Fulfilment
import Wire

/// Apple's Get Notification History as a store history (``StoreHistorySource``): one stream per notification type
/// (`REFUND`, `REFUND_REVERSED`, `REFUND_DECLINED`, `CONSUMPTION_REQUEST`), 180 days kept in production and 30 in the
/// sandbox, each signed payload verified as the topic's are (``AppleBodyReader``). Apple's errors as the poller acts on them:
/// StartDateTooFarInPastError (4000012) narrows the window, PaginationTokenExpiredError (4000017) and
/// InvalidPaginationTokenError (4000014) read on from the pages read, 429 is the quota.
public struct AppleNotificationHistory: StoreHistorySource {
    /// Apple's history in production: 180 days.
    public static let productionHistory: Duration = .seconds(180 * 86_400)
    /// Apple's history in the sandbox: 30 days.
    public static let sandboxHistory: Duration = .seconds(30 * 86_400)
    /// The types read by default: the refunds and the consumption requests.
    public static let refundTypes = ["REFUND", "REFUND_REVERSED", "REFUND_DECLINED", "CONSUMPTION_REQUEST"]
    /// Apple's errorCode for a `startDate` before the history it keeps (StartDateTooFarInPastError).
    static let startDateTooFarInPast: Int64 = 4_000_012

    let api: any AppStoreServerAPI
    let reader: AppleBodyReader
    public let streams: [String]
    public let historyKept: Duration
    public var store: Store { .apple }

    public init(
        api: any AppStoreServerAPI, reader: AppleBodyReader, environment: AppleNotification.Environment,
        types: [String] = Self.refundTypes
    ) {
        self.init(
            api: api, reader: reader,
            historyKept: environment == .sandbox ? Self.sandboxHistory : Self.productionHistory,
            types: types)
    }

    /// With the history Apple is taken to keep given as it is (a test's, say).
    public init(
        api: any AppStoreServerAPI, reader: AppleBodyReader, historyKept: Duration,
        types: [String] = Self.refundTypes
    ) {
        self.api = api
        self.reader = reader
        self.historyKept = historyKept
        self.streams = types
    }

    public func page(_ request: HistoryPageRequest, receivedAt: Date) async throws(StoreHistoryError) -> HistoryPage {
        let answer: NotificationHistoryPage
        do {
            answer = try await api.notificationHistory(
                NotificationHistoryRequest(
                    startDate: request.start, endDate: request.end, notificationType: request.stream,
                    paginationToken: request.pageToken))
        } catch {
            throw Self.historyError(error)
        }
        var items: [HistoryPage.Item] = []
        items.reserveCapacity(answer.signedPayloads.count)
        for payload in answer.signedPayloads {
            let read = await reader.readSignedPayload(
                payload, receivedAt: receivedAt, channel: .appleNotificationHistory)
            // Believed, so its signature verified: its signed time is Apple's.
            let time = (try? read.get()).flatMap { _ in Self.signedDate(of: payload) }
            items.append(HistoryPage.Item(read: read, body: Array(payload.utf8), time: time))
        }
        return HistoryPage(items: items, nextPageToken: answer.hasMore ? answer.paginationToken : nil)
    }

    /// Apple's error as the poller acts on it; the metric's result is the error's code.
    static func historyError(_ error: AppStoreError) -> StoreHistoryError {
        let kind: StoreHistoryError.Kind
        if error.appleErrorCode == startDateTooFarInPast {
            kind = .startTooFarInPast
        } else if error.code == .invalidRequest {
            // Of Apple's 400s only the token's (4000014, 4000017) leave the request otherwise valid; the poller treats
            // this kind as a token refused only while it sent one, and as a failure otherwise.
            kind = .pageTokenRefused
        } else if error.code == .rateLimited {
            kind = .quota(retryAfter: nil)
        } else {
            kind = .failed
        }
        return StoreHistoryError(kind, result: error.code.description, error.description)
    }

    /// The `signedDate` of a JWS's payload (not verified here: only for one the reader believed).
    static func signedDate(of jws: String) -> Date? {
        let parts = jws.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3, parts[1].count <= 1 << 20, let payload = Base64URL.decode(parts[1]),
            let object = try? JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any],
            let millis = object["signedDate"] as? NSNumber, millis.doubleValue.isFinite
        else { return nil }
        return Date(timeIntervalSince1970: millis.doubleValue / 1_000)
    }
}
