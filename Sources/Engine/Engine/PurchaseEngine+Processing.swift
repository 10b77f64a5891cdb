import Foundation
import Fulfilment
import Gamebase
import Logging
import Synchronization
import Wire

extension PurchaseEngine {
    /// Runs the flow for one message until its outcome is durable; returns whether its offset may be stored.
    ///
    /// Returns false — the message is abandoned and redelivered, nothing published for it — whenever the task is
    /// cancelled (shutdown) or the partition is no longer this member's (revoke): work cut short is never turned
    /// into a failure.
    func run(_ work: Work) async -> Bool {
        var infrastructureFailures = 0
        var counted = false
        var failedRounds = 0
        var totalAttempts = 0
        var generator = SystemRandomNumberGenerator()
        let gate: PurchaseProcessor.GamebaseGate = { [self] in try await waitForGamebase(work) }
        while stillRuns(work) {
            do {
                if !ledgerMonitor.isAvailable {
                    try await hold(work) { try await ledgerMonitor.waitUntilAvailable(stillWanted: $0) }
                }
                let outcome = try await processor.process(work.input, parsed: work.parsed, gate: gate)
                switch outcome {
                case .granted, .rejected:
                    if !counted { gamebaseMonitor.recordPurchase(failed: false) }
                    finish(work, outcome: outcome)
                    return true
                case .duplicate, .malformed:
                    finish(work, outcome: outcome)
                    return true
                case .gamebaseUnavailable(let error, let attempts):
                    guard stillRuns(work) else { return false }
                    // Each purchase counts once in the failure ratio, however often it is retried.
                    if !counted {
                        counted = true
                        gamebaseMonitor.recordPurchase(failed: true)
                    }
                    // Is Gamebase down, or is it this purchase? The prober answers with a call that depends on no
                    // purchase. Down (or refusing the configuration): the circuit is open now and the next attempt
                    // waits for it. Answering: this purchase is the problem — once it has failed a second round of
                    // attempts with Gamebase answering in between (one unlucky round on a lossy link is not a
                    // purchase that keeps failing), it goes to the dead-letter topic.
                    guard case .answers = await gamebaseMonitor.verdictAfterFailure() else { continue }
                    guard stillRuns(work) else { return false }
                    failedRounds += 1
                    totalAttempts += attempts
                    if failedRounds < Self.roundsBeforeDeadLetter {
                        let wait = configuration.infrastructureRetry.backoff(
                            afterAttempt: failedRounds, using: &generator)
                        do { try await clock.sleep(for: wait) } catch { return false }
                        continue
                    }
                    try await processor.deadLetter(
                        work.input, reason: .gamebaseUnavailable, error: error.description, attempts: totalAttempts)
                    finish(
                        work, outcome: outcome, deadLettered: true,
                        reason: ConsumeFailureReason.gamebaseUnavailable.rawValue)
                    return true
                case .stop(let error, let durable):
                    gamebaseMonitor.configurationRejected(error)
                    if durable {
                        finish(work, outcome: outcome)
                        return true
                    }
                // Nothing was decided: the next attempt waits until the configuration is accepted again.
                }
            } catch is CancellationError {
                return false
            } catch {
                guard stillRuns(work) else { return false }
                // The ledger or Kafka failed: nothing was decided, so trying again is safe. A ledger that does not
                // answer at all is an outage: the purchase waits for it, counting nothing.
                if await ledgerMonitor.isOutage(after: error) { continue }
                infrastructureFailures += 1
                let policy = configuration.infrastructureRetry
                logger.error(
                    "purchase could not be finished; retrying",
                    metadata: logMetadata(work).merging([
                        "iap.error": "\(error)", "iap.attempt": "\(infrastructureFailures)",
                    ]) { $1 })
                if infrastructureFailures >= policy.maxAttempts {
                    do {
                        guard stillRuns(work) else { return false }
                        try await processor.deadLetter(
                            work.input, reason: .internalError, error: "\(error)", attempts: infrastructureFailures)
                        finish(
                            work, outcome: nil, deadLettered: true, reason: ConsumeFailureReason.internalError.rawValue)
                        return true
                    } catch {
                        // Not even the dead-letter topic takes it: keep it, and keep trying.
                        logger.error(
                            "dead-lettering failed",
                            metadata: logMetadata(work).merging(["iap.error": "\(error)"]) { $1 })
                    }
                }
                let wait = policy.backoff(afterAttempt: min(infrastructureFailures, 8), using: &generator)
                do { try await clock.sleep(for: wait) } catch { return false }
            }
        }
        return false
    }

    /// Rounds of `worker.retry.max_attempts` attempts a purchase fails, with Gamebase answering the health probe
    /// after each, before it is dead-lettered as `gamebase_unavailable`.
    static let roundsBeforeDeadLetter = 2

    /// Whether `work` should go on: not cancelled, and its partition still this member's.
    func stillRuns(_ work: Work) -> Bool {
        !Task.isCancelled && owns(work)
    }

    /// Awaited before every Gamebase call of `work`: returns at once while the circuit is closed, else waits for it.
    func waitForGamebase(_ work: Work) async throws {
        if gamebaseMonitor.allowsCalls { return }
        try await hold(work) { try await gamebaseMonitor.waitUntilCallsAllowed(stillWanted: $0) }
    }

    /// Runs `wait` with `work` counted as held (a revoke does not wait for held purchases); `wait` gets the check
    /// that says whether the purchase is still wanted.
    func hold(_ work: Work, _ wait: (@escaping @Sendable () -> Bool) async throws -> Void) async throws {
        setHeld(work, by: 1)
        defer { setHeld(work, by: -1) }
        try await wait { [self] in owns(work) }
    }

    private func setHeld(_ work: Work, by change: Int) {
        state.withLock { state in
            state.update(work.partition, epoch: work.epoch) { $0.held += change }
        }
    }

    /// Counts and logs one outcome.
    func finish(_ work: Work, outcome: PurchaseOutcome?, deadLettered: Bool = false, reason: String? = nil) {
        var label: String
        var metadata = logMetadata(work)
        switch outcome {
        case .rejected(_, let rejection):
            label = "rejected"
            metadata["iap.reason"] = "\(rejection.rawValue)"
            metrics.countReason(rejection.rawValue, deadLettered: false)
        case .malformed(let problem):
            label = "malformed"
            metadata["iap.reason"] = "malformed_message"
            metadata["iap.detail"] = "\(problem)"
            metrics.countReason(ConsumeFailureReason.malformedMessage.rawValue, deadLettered: true)
        case .granted(_, let pending):
            label = "granted"
            if pending { metadata["iap.consume_pending"] = "true" }
        case .stop:
            // Durable: the grant stands, and its Consume waits for the configuration to be accepted again.
            label = "granted"
            metadata["iap.consume_pending"] = "true"
        case .duplicate:
            label = "duplicate"
        case .gamebaseUnavailable, nil:
            label = "dead_lettered"
        }
        if deadLettered {
            label = "dead_lettered"
            if let reason { metrics.countReason(reason, deadLettered: true) }
        }
        if let reason { metadata["iap.reason"] = "\(reason)" }
        metadata["iap.outcome"] = "\(label)"
        metrics.countPurchase(label)
        if let timestamp = work.input.timestampMilliseconds {
            // A producer can stamp any time; only a plausible age is a latency.
            let age = clock.now.clampedEpochMilliseconds.subtractingReportingOverflow(timestamp)
            if !age.overflow, age.partialValue >= 0 { metrics.recordPurchaseDuration(.milliseconds(age.partialValue)) }
        }
        logger.log(level: deadLettered ? .warning : .info, "purchase \(label)", metadata: metadata)
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
