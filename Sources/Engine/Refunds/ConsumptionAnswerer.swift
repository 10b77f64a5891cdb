import Foundation
import Fulfilment
import Logging
import ServiceLifecycle
import Wire

/// Answers App Store `CONSUMPTION_REQUEST`s (opt-in: `refunds.apple.consumption_info`) from the ledger's delivery
/// evidence — a grant of the transaction consumed at Gamebase is `DELIVERED`, anything else `UNDELIVERED_OTHER` — with
/// the studio's statements (`customer_consented`, `sample_content_provided`, `refund_preference`). Each request is claimed for a while, so one
/// instance answers it; a failed answer is tried again with backoff until Apple's 12-hour deadline, then given up.
/// Every attempt's outcome is recorded.
public final class ConsumptionAnswerer: Service {
    public struct Configuration: Sendable, Hashable {
        public var customerConsented: Bool
        public var sampleContentProvided: Bool
        public var refundPreference: String?
        public var interval: Duration
        /// How long a claimed request is this instance's to answer.
        public var lease: Duration
        public var batchSize: Int
        public var initialBackoff: Duration
        public var maxBackoff: Duration

        public init(
            customerConsented: Bool, sampleContentProvided: Bool = false, refundPreference: String? = nil,
            interval: Duration = .seconds(60), lease: Duration = .seconds(120), batchSize: Int = 50,
            initialBackoff: Duration = .seconds(60), maxBackoff: Duration = .seconds(1_800)
        ) {
            self.customerConsented = customerConsented
            self.sampleContentProvided = sampleContentProvided
            self.refundPreference = refundPreference
            self.interval = interval
            self.lease = lease
            self.batchSize = batchSize
            self.initialBackoff = initialBackoff
            self.maxBackoff = maxBackoff
        }
    }

    /// What one pass did.
    public struct Pass: Sendable, Hashable {
        public init() {}

        public var answered = 0
        public var retried = 0
        public var gaveUp = 0
    }

    /// The deadline gauge's value while nothing waits.
    public static let nothingPending: Double = 1e9

    let api: any AppStoreServerAPI
    let refunds: any ConsumptionRequestLedger
    let deadline: LedgerDeadline
    let configuration: Configuration
    let metrics: any EngineMetrics
    let clock: any WorkerClock
    let logger: Logger

    public init(
        api: any AppStoreServerAPI, refunds: any ConsumptionRequestLedger, deadline: LedgerDeadline = LedgerDeadline(),
        configuration: Configuration, metrics: any EngineMetrics, clock: any WorkerClock = .system, logger: Logger
    ) {
        self.api = api
        self.refunds = refunds
        self.deadline = deadline
        // A claim shorter than one answer's budget would skip every request it claimed, pass after pass.
        var configuration = configuration
        configuration.lease = max(configuration.lease, .seconds(Self.callBudget * 2))
        self.configuration = configuration
        self.metrics = metrics
        self.clock = clock
        self.logger = logger
    }

    public func run() async throws {
        await runPeriodically(every: configuration.interval, on: clock) { _ = await self.answerOnce() }
    }

    /// One pass over the requests due; never throws (a failing ledger is logged and the pass tried next time).
    public func answerOnce() async -> Pass {
        var pass = Pass()
        let now = clock.now
        let (refunds, until, limit) = (
            refunds, now.addingTimeInterval(configuration.lease.seconds), configuration.batchSize
        )
        // Each answer may take an App Store call's whole timeout: none is begun that could outlast the claim (measured
        // on the monotonic clock: a step of the wall clock does not stretch it).
        let lastStart = clock.instant + configuration.lease - .seconds(Self.callBudget)
        do {
            let claimed = try await deadline.run("claim consumption requests") {
                try await refunds.claimConsumptionRequests(now: now, until: until, limit: limit)
            }
            for request in claimed {
                guard clock.instant < lastStart else { break }  // the rest is claimed again once the claim lapses
                let answer = await answer(request)
                let recorded = try await deadline.run("record a consumption answer") {
                    try await refunds.recordConsumptionAnswer(answer, claim: request)
                }
                guard recorded else {
                    logger.warning(
                        "a consumption answer's claim lapsed before it was recorded",
                        metadata: ["iap.notification_id": "\(request.notificationId)"])
                    continue
                }
                switch answer.state {
                case .answered: pass.answered += 1
                case .gaveUp: pass.gaveUp += 1
                case .pending: pass.retried += 1
                }
                metrics.countConsumptionAnswer(answer.state == .pending ? "retried" : answer.state.rawValue)
            }
            let nearest = try await deadline.run("nearest consumption deadline") {
                try await refunds.nearestConsumptionDeadline(now: now)
            }
            metrics.setConsumptionDeadline(
                secondsLeft: nearest.map { max(0, $0.timeIntervalSince(clock.now)) } ?? Self.nothingPending)
        } catch {
            logger.error(
                "answering consumption requests failed; tried again next pass", metadata: ["iap.error": "\(error)"])
        }
        return pass
    }

    /// The longest one answer may take (the App Store call's timeout and a connection), kept clear of a claim's end.
    static let callBudget: TimeInterval = 45

    /// One attempt at answering `request`: what the ledger should record of it.
    func answer(_ request: ConsumptionRequest) async -> ConsumptionAnswer {
        let now = clock.now
        var answer = ConsumptionAnswer(
            notificationId: request.notificationId, transactionId: request.transactionId, state: .pending,
            attempts: request.attempts)
        guard now < request.deadline else {
            answer.state = .gaveUp
            answer.lastError = "Apple's 12-hour deadline passed before an answer was accepted"
            logger.error(
                "a consumption request was not answered in time",
                metadata: ["iap.notification_id": "\(request.notificationId)"])
            return answer
        }
        let (refunds, key) = (
            refunds, StorePaymentKey(marketId: Store.apple.marketId, paymentId: request.transactionId)
        )
        let grant: GrantRecord?
        do {
            grant = try await deadline.run("read the delivery evidence") { try await refunds.grant(paymentKey: key) }
        } catch {
            answer.lastError = "the ledger did not answer: \(error)"
            answer.nextAttemptAt = now.addingTimeInterval(configuration.initialBackoff.seconds)
            return answer
        }
        // Delivered is consumed at Gamebase: a grant whose Consume has not gone through is not yet evidence of it.
        let status = grant?.state == .consumed ? "DELIVERED" : "UNDELIVERED_OTHER"
        answer.deliveryStatus = status
        answer.attempts += 1
        do {
            try await api.sendConsumptionInformation(
                transactionId: request.transactionId,
                ConsumptionInformation(
                    deliveryStatus: status, customerConsented: configuration.customerConsented,
                    sampleContentProvided: configuration.sampleContentProvided,
                    refundPreference: configuration.refundPreference))
            answer.state = .answered
            answer.answeredAt = clock.now
            logger.info(
                "consumption request answered",
                metadata: [
                    "iap.notification_id": "\(request.notificationId)", "iap.delivery_status": "\(status)",
                    "iap.payment_seq": "\(grant?.paymentSeq ?? "-")",
                ])
        } catch {
            answer.lastError = error.description
            let wait = min(
                configuration.maxBackoff.seconds,
                configuration.initialBackoff.seconds * pow(2, Double(min(answer.attempts - 1, 20))))
            // The last attempt is made shortly before the deadline rather than not at all.
            let next = min(clock.now.addingTimeInterval(wait), request.deadline.addingTimeInterval(-Self.callBudget))
            // Apple refusing the answer as it is (not the key, which an operator may fix) will refuse it again.
            if error.code == .invalidRequest || next <= clock.now {
                answer.state = .gaveUp
                logger.error(
                    "a consumption request was given up",
                    metadata: ["iap.notification_id": "\(request.notificationId)", "iap.error": "\(error)"])
            } else {
                answer.nextAttemptAt = next
                logger.warning(
                    "a consumption answer failed; tried again",
                    metadata: ["iap.notification_id": "\(request.notificationId)", "iap.error": "\(error)"])
            }
        }
        return answer
    }
}
