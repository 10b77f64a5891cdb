import Foundation
import Gamebase
import GamebaseHTTP
import GamebaseSimulator
import Logging
import Synchronization

enum GamebaseTestSupport {
    static let appID = "AbCdEf12"
    static let secretKey = "sEcReT-KeY-0123456789"

    static var quietLogger: Logger {
        var logger = Logger(label: "gamebase.test")
        logger.logLevel = .critical
        return logger
    }

    static func payment(
        _ seq: String, user: String = "user-1", token: String? = nil, type: String = GamebaseProductType.consumable,
        market: String = "GG", price: Decimal = Decimal(string: "2.29")!, consumed: Bool = false, test: Bool = false
    ) -> SimulatedPayment {
        SimulatedPayment(
            PaymentTransaction(
                paymentSeq: seq, userId: user, productSeq: 1_000_123, currency: "EUR", price: price, marketId: market,
                accessToken: token ?? "tok-\(seq)", paymentId: "GPA.\(seq)", productType: type,
                gamebaseProductId: "gem_pack_100", purchaseTime: "2024-05-13T10:20:30+09:00", payload: "{\"c\":1}",
                isTestPurchase: test),
            consumed: consumed)
    }

    /// Runs `body` with a simulator listening on a free loopback port.
    static func withSimulator<T: Sendable>(
        payments: [SimulatedPayment] = [], faults: SimulatorFaults = SimulatorFaults(unknownFieldRate: 0),
        _ body: @Sendable (GamebaseSimulator, String) async throws -> T
    ) async throws -> T {
        let simulator = GamebaseSimulator(
            configuration: .init(appID: appID, secretKey: secretKey),
            state: SimulatorState(payments: payments, faults: faults),
            logger: quietLogger)
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask {
                try await simulator.run()
                return nil
            }
            let baseURL = await simulator.baseURL()
            do {
                let result = try await body(simulator, baseURL)
                group.cancelAll()
                return result
            } catch {
                group.cancelAll()
                throw error
            }
        }
    }

    static func client(
        _ baseURL: String, appID: String = appID, secretKey: String = secretKey, timeoutMilliseconds: Int = 5_000,
        consumeTimeoutMilliseconds: Int? = nil, logger: Logger = quietLogger
    ) -> GamebaseClient {
        GamebaseClient(
            configuration: GamebaseConfiguration(
                baseURL: baseURL, appID: appID, secretKey: Secret(secretKey), timeoutMilliseconds: timeoutMilliseconds,
                consumeTimeoutMilliseconds: consumeTimeoutMilliseconds ?? 10_000, maxConnections: 8),
            logger: logger)
    }
}

/// A log handler that keeps every rendered line, to prove what logs never contain.
final class CapturingLogHandler: LogHandler, @unchecked Sendable {
    // @unchecked: the lines live behind a Mutex-holding box; the rest is set once before use.
    final class Lines: Sendable {
        let lines = Mutex<[String]>([])
        var all: [String] { lines.withLock { $0 } }
    }
    let sink: Lines
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    init(sink: Lines) { self.sink = sink }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let merged = metadata.merging(event.metadata ?? [:]) { $1 }
        sink.lines.withLock { $0.append("\(event.level) \(event.message) \(merged)") }
    }
}
