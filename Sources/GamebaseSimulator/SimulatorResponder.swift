import Foundation
import Gamebase
import HTTPTypes
import Hummingbird
import NIOCore
import Wire

/// Answers requests as Gamebase does: HTTP 200 with the JSON envelope for every outcome (contract §3.2).
struct SimulatorResponder: Sendable {
    let appID: String
    let secretKey: String
    let state: SimulatorState

    static let secretKeyHeader = HTTPField.Name("X-Secret-Key")!
    static let transactionHeader = HTTPField.Name("X-TCGB-Transaction-Id")!

    func respond(to request: Request, context: some RequestContext) async throws -> Response {
        let path = request.uri.path
        if path.hasPrefix("/admin/") {
            return try await SimulatorAdmin(state: state).respond(to: request, path: path)
        }
        let transactionID = Self.transactionID(request.headers[Self.transactionHeader])
        var reply = EnvelopeWriter(transactionID: transactionID, uri: path)
        let faults = state.faults
        if faults.latencyMs > 0 { try await Task.sleep(for: .milliseconds(faults.latencyMs)) }
        reply.addUnknownFields = faults.unknownFieldRate > 0 && Double.random(in: 0..<1) < faults.unknownFieldRate

        // /tcgb-inapp/v1.3/apps/{appId}/...
        let parts = path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        guard parts.count >= 5, parts[0] == "tcgb-inapp", parts[1] == "v1.3", parts[2] == "apps" else {
            return reply.failure(.undefinedAPI, "undefined API")
        }
        let route = parts[4...].joined(separator: "/")
        let api: String
        switch (request.method, route) {
        case (.get, "payment/transaction"): api = GamebaseAPIName.paymentTransaction
        case (.post, "consume"): api = GamebaseAPIName.consume
        case (.post, "consumable"): api = GamebaseAPIName.consumable
        default: return reply.failure(.undefinedAPI, "undefined API")
        }
        state.countCall(api)
        guard parts[3] == appID else { return reply.failure(.invalidAppID, "invalid app id") }
        guard request.headers[Self.secretKeyHeader] == secretKey else {
            return reply.failure(.invalidSecretKey, "invalid secret key")
        }
        guard let contentType = request.headers[.contentType], contentType.lowercased().hasPrefix("application/json")
        else {
            return reply.failure(.invalidContentType, "invalid Content-Type")
        }
        if let fault = injectedFault(faults, reply: reply) { return fault }

        switch api {
        case GamebaseAPIName.paymentTransaction:
            guard let token = request.uri.queryParameters["accessToken"].map(String.init), !token.isEmpty else {
                return reply.failure(.missingParameter, "accessToken is required")
            }
            if let code = faults.tokenResultCodes[token] {
                return reply.failure(GamebaseResultCode(code), "the token cannot be processed")
            }
            guard let transaction = state.encodedTransaction(token: token) else {
                return reply.failure(GamebaseResultCode(faults.unknownTokenResultCode), "invalid accessToken")
            }
            return reply.success(json: transaction)

        case GamebaseAPIName.consume:
            guard let body: ConsumeBody = try await decodeBody(request, reply: &reply) else { return reply.response! }
            guard let seq = body.paymentSeq, !seq.isEmpty, let token = body.accessToken, !token.isEmpty else {
                return reply.failure(.missingParameter, "paymentSeq and accessToken are required")
            }
            if let code = faults.consumeResultCodes[seq] {
                return reply.failure(GamebaseResultCode(code), "the payment cannot be consumed now")
            }
            switch state.consume(paymentSeq: seq, token: token) {
            case .rejected:
                return reply.failure(.consumeFailed, "consume failed")
            case .alreadyConsumed:
                return reply.failure(.alreadyConsumed, "already consumed")
            case .consumed(let payment):
                if faults.slowConsumeRate > 0, Double.random(in: 0..<1) < faults.slowConsumeRate {
                    // The consume has applied; the answer comes after the caller gave up (contract §10).
                    try await Task.sleep(for: .milliseconds(faults.slowConsumeDelayMs))
                }
                let t = payment.transaction
                let result = ConsumeResult(
                    price: t.price, currency: t.currency, productSeq: t.productSeq, marketId: t.marketId,
                    gamebaseProductId: t.gamebaseProductId, payload: t.payload)
                return reply.success(json: Array(try JSONEncoder().encode(result)))
            }

        default:
            guard let body: ConsumablesBody = try await decodeBody(request, reply: &reply) else {
                return reply.response!
            }
            guard let userId = body.userId, !userId.isEmpty else {
                return reply.failure(.missingParameter, "userId is required")
            }
            state.countList(userId: userId)
            let markets = body.marketIds ?? body.marketId.map { [$0] }
            let items = state.consumables(userId: userId, marketIds: markets).map { t in
                ConsumableItem(
                    paymentSeq: t.paymentSeq, productSeq: t.productSeq, currency: t.currency, price: t.price,
                    marketId: t.marketId, accessToken: t.accessToken, paymentId: t.paymentId,
                    gamebaseProductId: t.gamebaseProductId, purchaseTime: t.purchaseTime, payload: t.payload,
                    isTestPurchase: t.isTestPurchase)
            }
            return reply.success(json: Array(try JSONEncoder().encode(items)))
        }
    }

    struct ConsumeBody: Decodable {
        var paymentSeq: String?
        var accessToken: String?
    }

    struct ConsumablesBody: Decodable {
        var userId: String?
        var marketIds: [String]?
        var marketId: String?
    }

    /// A transient failure, when the dice say so: a T-class code, or a proxy's 502/503 that is not JSON.
    private func injectedFault(_ faults: SimulatorFaults, reply: EnvelopeWriter) -> Response? {
        guard faults.outage || (faults.faultRate > 0 && Double.random(in: 0..<1) < faults.faultRate) else { return nil }
        switch Int.random(in: 0..<5) {
        case 0: return reply.failure(.unknownError, "unknown error")
        case 1: return reply.failure(.internalSystemError, "internal system error")
        case 2: return reply.failure(.internalDBError, "internal DB error")
        case 3: return EnvelopeWriter.plain(status: .badGateway, text: "<html>502 Bad Gateway</html>")
        default: return EnvelopeWriter.plain(status: .serviceUnavailable, text: "upstream unavailable")
        }
    }

    private func decodeBody<Body: Decodable>(_ request: Request, reply: inout EnvelopeWriter) async throws -> Body? {
        let buffer = try await request.body.collect(upTo: 1 << 20)
        do {
            return try JSONDecoder().decode(Body.self, from: Data(buffer.readableBytesView))
        } catch DecodingError.typeMismatch {
            reply.response = reply.failure(GamebaseResultCode(-4_000_001), "parameter of the wrong type")
        } catch {
            reply.response = reply.failure(.malformedJSON, "malformed JSON")
        }
        return nil
    }

    /// The caller's transaction id when it is a plausible id, else a fresh one.
    static func transactionID(_ header: String?) -> String {
        if let header, !header.isEmpty, header.utf8.count <= 128,
            header.utf8.allSatisfy({ $0.isASCIIAlphanumeric || transactionIDMarks.contains($0) })
        {
            return header
        }
        return GamebaseTransactionID().value
    }

    private static let transactionIDMarks = Array("-_.:".utf8)
}
