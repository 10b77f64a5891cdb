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
    ///
    /// The failures' handling is out of line (``afterGamebaseFailure(_:_:attempts:retry:)``,
    /// ``afterFailure(_:_:retry:)``): this frame lives as long as its purchase is in flight, and what those hold
    /// across their waits would otherwise be in it for every purchase (issue #39).
    func run(_ work: Work) async -> Bool {
        var retry = RetryState()
        let gate: PurchaseProcessor.GamebaseGate = { [self] in try await waitForGamebase(work) }
        while stillRuns(work) {
            let next: RetryState.Next
            do {
                if !ledgerMonitor.isAvailable {
                    try await hold(work) { try await ledgerMonitor.waitUntilAvailable(stillWanted: $0) }
                }
                let outcome = try await processor.process(work.input, parsed: work.parsed, gate: gate)
                switch outcome {
                case .granted, .rejected:
                    if !retry.counted { gamebaseMonitor.recordPurchase(failed: false) }
                    finish(work, outcome: outcome)
                    return true
                case .duplicate, .malformed:
                    finish(work, outcome: outcome)
                    return true
                case .gamebaseUnavailable(let error, let attempts):
                    next = try await afterGamebaseFailure(work, error, attempts: attempts, retry: &retry)
                case .stop(let error, let durable):
                    gamebaseMonitor.configurationRejected(error)
                    if durable {
                        finish(work, outcome: outcome)
                        return true
                    }
                    // Nothing was decided: the next attempt waits until the configuration is accepted again.
                    next = .again
                }
            } catch is CancellationError {
                return false
            } catch {
                next = await afterFailure(work, error, retry: &retry)
            }
            switch next {
            case .again: continue
            case .finished(let storeOffset): return storeOffset
            }
        }
        return false
    }

    /// What one purchase's failures have counted so far.
    struct RetryState {
        var infrastructureFailures = 0
        /// Whether the purchase counted in the Gamebase failure ratio already (each counts once).
        var counted = false
        var failedRounds = 0
        var totalAttempts = 0
        var generator = SystemRandomNumberGenerator()

        enum Next {
            /// Try the flow again.
            case again
            /// Done with the message: whether its offset may be stored.
            case finished(Bool)
        }
    }

    /// After Gamebase was unavailable for a purchase: waits and tries again, or dead-letters it.
    @inline(never)
    func afterGamebaseFailure(_ work: Work, _ error: GamebaseError, attempts: Int, retry: inout RetryState)
        async throws -> RetryState.Next
    {
        guard stillRuns(work) else { return .finished(false) }
        // Each purchase counts once in the failure ratio, however often it is retried.
        if !retry.counted {
            retry.counted = true
            gamebaseMonitor.recordPurchase(failed: true)
        }
        // Is Gamebase down, or is it this purchase? The prober answers with a call that depends on no
        // purchase. Down (or refusing the configuration): the circuit is open now and the next attempt
        // waits for it. Answering: this purchase is the problem — once it has failed a second round of
        // attempts with Gamebase answering in between (one unlucky round on a lossy link is not a
        // purchase that keeps failing), it goes to the dead-letter topic.
        guard case .answers = await gamebaseMonitor.verdictAfterFailure() else { return .again }
        guard stillRuns(work) else { return .finished(false) }
        retry.failedRounds += 1
        retry.totalAttempts += attempts
        if retry.failedRounds < Self.roundsBeforeDeadLetter {
            let wait = configuration.infrastructureRetry.backoff(
                afterAttempt: retry.failedRounds, using: &retry.generator)
            do { try await clock.sleep(for: wait) } catch { return .finished(false) }
            return .again
        }
        try await processor.deadLetter(
            work.input, reason: .gamebaseUnavailable, error: error.description, attempts: retry.totalAttempts)
        finish(
            work, outcome: .gamebaseUnavailable(error, attempts: attempts), deadLettered: true,
            reason: ConsumeFailureReason.gamebaseUnavailable.rawValue)
        return .finished(true)
    }

    /// After the ledger or Kafka failed: nothing was decided, so trying again is safe. A ledger that does not
    /// answer at all is an outage: the purchase waits for it, counting nothing.
    @inline(never)
    func afterFailure(_ work: Work, _ error: any Error, retry: inout RetryState) async -> RetryState.Next {
        guard stillRuns(work) else { return .finished(false) }
        if await ledgerMonitor.isOutage(after: error) { return .again }
        retry.infrastructureFailures += 1
        let policy = configuration.infrastructureRetry
        logger.error(
            "purchase could not be finished; retrying",
            metadata: logMetadata(work).merging([
                "iap.error": "\(error)", "iap.attempt": "\(retry.infrastructureFailures)",
            ]) { $1 })
        if retry.infrastructureFailures >= policy.maxAttempts {
            do {
                guard stillRuns(work) else { return .finished(false) }
                try await processor.deadLetter(
                    work.input, reason: .internalError, error: "\(error)", attempts: retry.infrastructureFailures)
                finish(work, outcome: nil, deadLettered: true, reason: ConsumeFailureReason.internalError.rawValue)
                return .finished(true)
            } catch {
                // Not even the dead-letter topic takes it: keep it, and keep trying.
                logger.error(
                    "dead-lettering failed",
                    metadata: logMetadata(work).merging(["iap.error": "\(error)"]) { $1 })
            }
        }
        let wait = policy.backoff(afterAttempt: min(retry.infrastructureFailures, 8), using: &retry.generator)
        do { try await clock.sleep(for: wait) } catch { return .finished(false) }
        return .again
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
