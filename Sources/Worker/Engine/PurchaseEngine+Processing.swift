import Foundation
import Fulfilment
import Gamebase
import Kafka
import Ledger
import Logging
import Prometheus
import Synchronization

extension PurchaseEngine {
    /// Runs the flow for one message until its outcome is durable; returns whether its offset may be stored.
    func run(_ work: Work) async -> Bool {
        var infrastructureFailures = 0
        var generator = SystemRandomNumberGenerator()
        // Whether this purchase is the circuit's probe: an outcome that says nothing about Gamebase hands the
        // probe on, or the circuit would stay half-open with the partitions paused.
        var probing = false
        defer { handOnProbe(&probing) }
        while !Task.isCancelled {
            guard owns(work) else { return false }
            do {
                // Admitted while the circuit is open (a partition resumed with nothing left to probe): wait like
                // the purchases already held.
                if !probing, breaker.withLock({ $0.isOpen }) { probing = try await hold(work) }
                let outcome = try await processor.process(work.input, parsed: work.parsed)
                switch outcome {
                case .granted, .rejected:
                    recordGamebase(failed: false)
                    probing = false
                    finish(work, outcome: outcome)
                    return true
                case .duplicate, .malformed:
                    finish(work, outcome: outcome)
                    return true
                case .gamebaseUnavailable(let error, let attempts):
                    recordGamebase(failed: true)
                    probing = false
                    if breaker.withLock({ $0.shouldDeadLetter(now: .now) }) {
                        try await processor.deadLetter(
                            work.input, reason: .gamebaseUnavailable, error: error.description, attempts: attempts)
                        finish(work, outcome: outcome, deadLettered: true, reason: ConsumeFailureReason.gamebaseUnavailable.rawValue)
                        return true
                    }
                    // Gamebase is failing as a whole (or it is too early to tell): hold, never flood the dead-letter topic.
                    probing = try await hold(work)
                case .stop(let error, let durable):
                    stop(because: error)
                    return durable
                }
            } catch is CancellationError {
                return false
            } catch {
                // The ledger or Kafka failed: nothing was decided, so trying again is safe.
                handOnProbe(&probing)
                infrastructureFailures += 1
                let policy = configuration.infrastructureRetry
                logger.error(
                    "purchase could not be finished; retrying",
                    metadata: logMetadata(work).merging(["iap.error": "\(error)", "iap.attempt": "\(infrastructureFailures)"]) { $1 })
                if infrastructureFailures >= policy.maxAttempts {
                    do {
                        try await processor.deadLetter(
                            work.input, reason: .internalError, error: "\(error)", attempts: infrastructureFailures)
                        finish(work, outcome: nil, deadLettered: true, reason: ConsumeFailureReason.internalError.rawValue)
                        return true
                    } catch {
                        // Not even the dead-letter topic takes it: keep it, and keep trying.
                        logger.error("dead-lettering failed", metadata: logMetadata(work).merging(["iap.error": "\(error)"]) { $1 })
                    }
                }
                let wait = policy.backoff(afterAttempt: min(infrastructureFailures, 8), using: &generator)
                do { try await Task.sleep(for: wait) } catch { return false }
            }
        }
        return false
    }

    /// Ends this purchase's turn as the circuit's probe, if it has it, without a verdict on Gamebase.
    func handOnProbe(_ probing: inout Bool) {
        guard probing else { return }
        breaker.withLock { $0.probeEndedWithoutVerdict(now: .now) }
        probing = false
    }

    /// Waits until the circuit lets this purchase try Gamebase again; returns whether it goes as the probe.
    func hold(_ work: Work) async throws -> Bool {
        var generator = SystemRandomNumberGenerator()
        while true {
            let jitter = Double.random(in: 0.5...1.5, using: &generator)
            try await Task.sleep(for: configuration.holdInterval * jitter)
            guard owns(work), state.withLock({ $0.stoppedBy == nil }) else { throw CancellationError() }
            let allowed = breaker.withLock { breaker -> Bool? in breaker.allowAttempt(now: .now) ? breaker.isProbing : nil }
            if let probing = allowed { return probing }
        }
    }

    func recordGamebase(failed: Bool) {
        let transition = breaker.withLock { $0.record(failed: failed, now: .now) }
        switch transition {
        case .opened:
            logger.error("Gamebase keeps failing: circuit open, partitions paused")
            metrics.circuitOpen.set(to: 1)
            health.setCircuitOpen(true)
            consumer.pause(Array(consumer.assignment))
        case .closed:
            logger.notice("Gamebase answers again: circuit closed, partitions resumed")
            metrics.circuitOpen.set(to: 0)
            health.setCircuitOpen(false)
            if state.withLock({ $0.stoppedBy == nil }) { consumer.resume(Array(consumer.assignment)) }
        case nil:
            break
        }
    }

    /// A configuration failure: stop consuming, commit nothing more for it, report not ready; a restart with the
    /// right configuration finishes the work.
    func stop(because error: GamebaseError) {
        let first = state.withLock { state -> Bool in
            defer { if state.stoppedBy == nil { state.stoppedBy = error } }
            return state.stoppedBy == nil
        }
        guard first else { return }
        logger.critical(
            "Gamebase rejects the worker's configuration; consumption stopped until restart with a fixed configuration",
            metadata: [
                "gamebase.result_code": "\(error.resultCode?.description ?? "-")", "gamebase.api": "\(error.api)",
                "gamebase.error": "\(error.message)",
            ])
        metrics.stopped.set(to: 1)
        health.setStopped("Gamebase configuration failure (resultCode \(error.resultCode?.description ?? "-"))")
        consumer.pause(Array(consumer.assignment))
    }

    /// Metrics and the one log line per outcome.
    func finish(_ work: Work, outcome: PurchaseOutcome?, deadLettered: Bool = false, reason: String? = nil) {
        let label: String
        var metadata = logMetadata(work)
        switch outcome {
        case .rejected(_, let rejection):
            label = "rejected"
            metadata["iap.reason"] = "\(rejection.rawValue)"
        case .malformed(let problem):
            label = "malformed"
            metadata["iap.reason"] = "malformed_message"
            metadata["iap.detail"] = "\(problem)"
        case .granted(_, let pending):
            label = "granted"
            if pending { metadata["iap.consume_pending"] = "true" }
        case .duplicate:
            label = "duplicate"
        default:
            label = "dead_lettered"
        }
        let finalLabel = deadLettered ? "dead_lettered" : label
        if let reason { metadata["iap.reason"] = "\(reason)" }
        metadata["iap.outcome"] = "\(finalLabel)"
        metrics.countPurchase(finalLabel)
        if let timestamp = work.input.timestamp {
            metrics.recordPurchaseDuration(.milliseconds(Int64(Date().timeIntervalSince(timestamp) * 1000)))
        }
        logger.log(level: deadLettered ? .warning : .info, "purchase \(finalLabel)", metadata: metadata)
    }

    func logMetadata(_ work: Work) -> Logger.Metadata {
        var metadata: Logger.Metadata = [
            "kafka.topic": "\(work.input.source.topic)", "kafka.partition": "\(work.input.source.partition)",
            "kafka.offset": "\(work.input.source.offset)",
        ]
        if case .success(let message) = work.parsed {
            metadata["iap.payment_seq"] = "\(message.paymentSeq)"
            metadata["iap.user_id"] = "\(message.userId)"
        }
        return metadata
    }
}
