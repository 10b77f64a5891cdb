import Foundation
import Fulfilment
import Gamebase
import Logging
import Wire

/// One reconciliation pass: lists the unconsumed payments of the users the ledger saw recently (Gamebase's List
/// Consumables) and runs each one the ledger has neither granted nor rejected, once it is past its grace period,
/// through the same flow as a purchase message (``PurchaseProcessor/process(_:parsed:gate:)``), as
/// `(userId, paymentSeq, purchaseToken = accessToken)`. Nothing here grants: the flow does, with every check, the
/// unique paymentSeq and the outbox.
///
/// Every Gamebase call of the pass (List Consumables, and the flow's Get Payment Transaction and Consume) first
/// takes a token from `limiter` and checks that Gamebase may be called.
public struct ReconcilePass: Sendable {
    public struct Options: Sendable {
        /// The users to check; `nil`: the users of the lookback window (``ReconciliationLedger``).
        public var users: [String]?
        /// Look and report; grant, record and claim nothing.
        public var dryRun: Bool
        /// Claim each user before checking it, so instances sharing the ledger check a user once per interval,
        /// and take only users that are due. The daemon claims; the command checks whom it is told.
        public var claim: Bool
        /// When the pass must end (the next pass's start): users not reached by then are left for it.
        public var deadline: ContinuousClock.Instant?

        public init(
            users: [String]? = nil, dryRun: Bool = false, claim: Bool = false, deadline: ContinuousClock.Instant? = nil
        ) {
            self.users = users
            self.dryRun = dryRun
            self.claim = claim
            self.deadline = deadline
        }
    }

    let processor: PurchaseProcessor
    let ledger: any ReconciliationLedger
    let configuration: Reconciler.Configuration
    let limiter: RateLimiter
    let health: any ReconcileHealth
    let metrics: any EngineMetrics
    let clock: any WorkerClock
    let logger: Logger

    /// - Parameters:
    ///   - ledger: the reconciliation role (its calls have the flow's deadline); the payments themselves go through
    ///     `processor`.
    public init(
        processor: PurchaseProcessor, ledger: any ReconciliationLedger, configuration: Reconciler.Configuration,
        health: any ReconcileHealth, metrics: any EngineMetrics, clock: any WorkerClock = .system, logger: Logger
    ) {
        self.processor = processor
        self.ledger = ledger
        self.configuration = configuration
        self.limiter = RateLimiter(perSecond: Double(configuration.maxCallsPerSecond), clock: clock)
        self.health = health
        self.metrics = metrics
        self.clock = clock
        self.logger = logger
    }

    /// The reconciliation role's calls, each within the ledger's deadline.
    private func reconciliation<T: Sendable>(
        _ what: String, _ call: @escaping @Sendable (any ReconciliationLedger) async throws -> T
    ) async throws -> T {
        let ledger = ledger
        return try await processor.ledger.deadline.run(what) { try await call(ledger) }
    }

    /// Users claimed at once: about a second of calls, so a claimed user is listed soon after its claim.
    var claimBatch: Int { max(1, min(configuration.maxCallsPerSecond, 100)) }

    /// Why a pass stops before its end.
    struct Interrupted: Error {
        var reason: String
        var configurationRejected = false
    }

    /// Runs the pass. It never throws: what failed is in the report (and told to `health`).
    public func run(_ options: Options) async -> Report {
        let started = clock.instant
        var report = Report()
        do {
            try await run(options, into: &report)
        } catch let interrupted as Interrupted {
            report.stoppedEarly = interrupted.reason
            report.configurationRejected = interrupted.configurationRejected
        } catch is CancellationError {
            report.stoppedEarly = "cancelled"
        } catch {
            // The ledger, or Kafka publishing an event of the flow.
            report.stoppedEarly = "a ledger or Kafka call failed: \(error)"
            report.dependencyFailed = true
            await health.ledgerFailed(error)
        }
        report.duration = clock.instant - started
        if !options.dryRun {
            for outcome in Outcome.counted {
                if let count = report.outcomes[outcome] { metrics.countReconciled(outcome.rawValue, by: count) }
            }
            metrics.recordReconcilePass(
                report.duration,
                summary: WorkerStatus.ReconcilePass(
                    endedAt: clock.now, durationSeconds: report.duration.seconds, usersChecked: report.usersChecked,
                    usersLeft: report.usersLeft,
                    outcomes: Dictionary(uniqueKeysWithValues: report.outcomes.map { ($0.key.rawValue, $0.value) }),
                    stoppedEarly: report.stoppedEarly))
        }
        return report
    }

    /// Refreshes of the users table a pass makes at most before reading it (each spends a few seconds at most).
    static let maxRefreshesPerPass = 5

    private func run(_ options: Options, into report: inout Report) async throws {
        let now = clock.now
        guard health.ledgerAvailable else { throw Interrupted(reason: "the ledger is unavailable") }
        guard health.allowsGamebaseCalls else {
            throw Interrupted(reason: "Gamebase calls are held (circuit open or stopped)")
        }
        // The pruner deletes the reconciler's stale state in batches; with pruning off, each claiming pass does.
        if options.claim, !options.dryRun, configuration.prunesOwnState {
            let before = clock.wallCutoff(olderThan: configuration.lookback)
            try await reconciliation("reconciliation pruning") { try await $0.pruneReconciliation(before: before) }
        }
        // Widened, never narrowed, by a forward step of the wall clock.
        let activeSince = clock.wallCutoff(olderThan: configuration.lookback)
        // Due users are read from the users table: bring it up to date before the first page — a backlog (after an
        // upgrade, or the reconciler held by an open circuit) over a few refreshes of bounded time each, the rest by
        // the next passes, saying so.
        if options.claim, options.users == nil {
            var refreshes = 1
            do {
                while try await !reconciliation(
                    "reconciliation users refresh",
                    {
                        try await $0.refreshReconciliationUsers(activeSince: activeSince)
                    })
                {
                    guard refreshes < Self.maxRefreshesPerPass, options.deadline.map({ clock.instant < $0 }) ?? true
                    else {
                        logger.notice(
                            "the reconciler's users table is still catching up with the ledger; the next passes go on",
                            metadata: ["reconcile.refreshes": "\(refreshes)"])
                        break
                    }
                    refreshes += 1
                }
            } catch let error where !(error is CancellationError) {
                // A refresh that fails (one too large for the ledger's deadline, a lock conflict between instances)
                // must not stop the pass: the users already due are still checked, and the next pass refreshes again.
                logger.error(
                    "the reconciler's users table could not be brought up to date; checking the users already due",
                    metadata: ["iap.error": "\(error)"])
            }
        }
        var users: [String]
        if let given = options.users {
            users = given
        } else {
            let (dueAt, limit) = (options.claim ? now : nil, options.claim ? maxUsersPerPass : Int.max)
            users = try await reconciliation("reconciliation users") {
                try await $0.reconciliationUsers(activeSince: activeSince, dueAt: dueAt, limit: limit)
            }
        }
        // A claiming pass reads due users a page at a time and, when a page was full, reads the next one, until no
        // user is due or the deadline passes: instances sharing the ledger read the same page and split it by their
        // claims, so without this every instance would stop at the first page and more instances would add no
        // capacity. Users claimed by this pass are due again only after its start (``nextCheck(passStart:)``), so
        // the next page never holds them; one already seen is skipped all the same.
        let pages = options.claim && !options.dryRun && options.users == nil
        var seen = Set<String>()
        var pageWasFull = users.count >= maxUsersPerPass
        var ledgerFailed = false
        while true {
            if pages { seen.formUnion(users) }
            var index = 0
            while index < users.count {
                let batch = Array(users[index..<min(index + claimBatch, users.count)])
                if let deadline = options.deadline, clock.instant >= deadline {
                    // Left: the users still unclaimed since this pass started (other instances may have taken the
                    // rest of this pass's list), whom the next pass takes first.
                    report.usersLeft =
                        options.claim
                        ? try await dueUsers(activeSince: activeSince, now: now).count : users.count - index
                    guard report.usersLeft > 0 else { return }
                    throw Interrupted(reason: "the interval ended before every due user was checked")
                }
                guard health.ledgerAvailable else { throw Interrupted(reason: "the ledger is unavailable") }
                guard health.allowsGamebaseCalls else {
                    throw Interrupted(reason: "Gamebase calls are held (circuit open or stopped)")
                }
                let claimed =
                    options.claim && !options.dryRun
                    ? try await claim(batch, nextCheck: nextCheck(passStart: now))
                    : batch
                let claimedSet = Set(claimed)
                for user in batch where claimedSet.contains(user) {
                    try await check(
                        user, sightedAt: now, options: options, report: &report, ledgerFailedBefore: &ledgerFailed)
                    report.usersChecked += 1
                }
                index += batch.count
            }
            guard pages, pageWasFull else { return }
            let page = try await dueUsers(activeSince: activeSince, now: now)
            pageWasFull = page.count >= maxUsersPerPass
            users = page.filter { !seen.contains($0) }
            guard !users.isEmpty else { return }
        }
    }

    /// A page of the users due at `now`.
    private func dueUsers(activeSince: Date, now: Date) async throws -> [String] {
        let limit = maxUsersPerPass
        return try await reconciliation("reconciliation users") {
            try await $0.reconciliationUsers(activeSince: activeSince, dueAt: now, limit: limit)
        }
    }

    /// Claims `users` for a check, now.
    private func claim(_ users: [String], nextCheck: Date) async throws -> [String] {
        let now = clock.now
        return try await reconciliation("reconciliation claim") {
            try await $0.claimReconciliationUsers(users, now: now, nextCheck: nextCheck)
        }
    }

    /// When a user claimed by the pass that started at `passStart` is due again: at the next pass's start, one
    /// interval later (less a hundredth of it, at most a second, so clock jitter never makes it miss that pass).
    /// Due users are read when a pass starts, so this puts every user in every pass, and no pass of any instance
    /// takes it again before then. The grace is measured from the same instant (a payment counts as first seen when
    /// its pass started), so with `grace_ms` ≤ `interval_ms` the pass after the one that first saw a payment takes
    /// it.
    func nextCheck(passStart: Date) -> Date {
        let interval = configuration.interval.seconds
        return passStart.addingTimeInterval(interval - min(interval / 100, 1))
    }

    /// Users a daemon pass reads at once (a page): what its rate allows in one interval (each user costs a call at
    /// least).
    var maxUsersPerPass: Int {
        let perInterval = configuration.interval.seconds * Double(configuration.maxCallsPerSecond)
        return Int(min(max(perInterval, 100), 10_000_000))
    }

    /// Waits for a token and checks that Gamebase may still be called; before every call of the pass.
    func gate() async throws {
        try await limiter.acquire()
        guard health.allowsGamebaseCalls else {
            throw Interrupted(reason: "Gamebase calls are held (circuit open or stopped)")
        }
    }

    /// Lists one user's unconsumed payments and takes those due.
    /// - Parameter ledgerFailedBefore: whether the ledger failed on the previous user's payments; set for the next.
    private func check(
        _ user: String, sightedAt: Date, options: Options, report: inout Report, ledgerFailedBefore: inout Bool
    ) async throws {
        let listed: [ConsumableItem]
        do {
            let transactionID = GamebaseTransactionID()
            listed = try await processor.configuration.verifyRetry.run { _ in
                try await gate()
                return try await processor.gamebase.listConsumables(
                    userId: user, marketIds: nil, transactionID: transactionID)
            }
        } catch let error as GamebaseError {
            try Task.checkCancellation()
            report.record(
                Finding(
                    userId: user, paymentSeq: nil, outcome: .failed, detail: "List Consumables failed: \(error.message)"
                ))
            if error.kind == .configuration {
                // List Consumables is the reconciler's alone: its refusal (an API not enabled or not routed for this
                // app, -4040202, -4060003) stops reconciliation until the next pass, never the message path, which
                // meets a configuration failure of its own calls by itself.
                logger.error(
                    """
                    Gamebase refuses List Consumables with this configuration; reconciliation stops until the next \
                    pass
                    """,
                    metadata: [
                        "gamebase.result_code": "\(error.resultCode?.description ?? "-")",
                        "gamebase.error": "\(error.message)",
                    ])
                throw Interrupted(
                    reason: "Gamebase rejects the configuration for List Consumables", configurationRejected: true)
            }
            try await judge(error)
            return
        }
        let candidates = takeable(listed, of: user, report: &report)
        guard !candidates.isEmpty else { return }
        // What the ledger knows decides first: granted or rejected payments never reach the grace table.
        var undecided: [(input: PurchaseInput, message: PurchaseMessage)] = []
        let sightings: [String: Date]
        do {
            for candidate in candidates {
                let message = candidate.message
                let known = try await processor.ledger.lookup(
                    RejectionKey(paymentSeq: message.paymentSeq, userId: user, tokenHash: message.tokenHash))
                if let grant = known.grant {
                    let detail =
                        grant.state == .granted ? "granted, awaiting Consume (the sweeper's)" : "granted and consumed"
                    report.record(
                        Finding(userId: user, paymentSeq: message.paymentSeq, outcome: .alreadyGranted, detail: detail))
                } else if let rejection = known.rejection {
                    report.record(
                        Finding(
                            userId: user, paymentSeq: message.paymentSeq, outcome: .alreadyRejected,
                            detail: "rejected before: \(rejection.reason)"))
                } else {
                    undecided.append(candidate)
                }
            }
            guard !undecided.isEmpty else {
                ledgerFailedBefore = false
                return
            }
            let payments = undecided.map { ReconciliationSighting(paymentSeq: $0.message.paymentSeq, userId: user) }
            let record = !options.dryRun
            sightings = try await reconciliation("reconciliation sightings") {
                try await $0.reconciliationSightings(payments, now: sightedAt, record: record)
            }
            ledgerFailedBefore = false
        } catch let error as LedgerError {
            // One user's payments may be what the ledger refuses: that user fails, the pass goes on. Two users in a
            // row failing so is the ledger's failure, which ends the pass.
            guard !ledgerFailedBefore else { throw error }
            ledgerFailedBefore = true
            logger.warning(
                "reconciliation could not read the ledger for a user's listed payments",
                metadata: ["iap.user_id": "\(user)", "iap.error": "\(error)"])
            report.record(
                Finding(
                    userId: user, paymentSeq: nil, outcome: .failed,
                    detail: "the ledger failed on this user's listed payments: \(error.message)"))
            return
        }
        var decided: [String] = []
        for (input, message) in undecided {
            let now = clock.now
            // A dry run records nothing: a payment not seen before is judged as the pass would record it.
            guard let firstSeen = sightings[message.paymentSeq] ?? (options.dryRun ? sightedAt : nil) else {
                report.record(
                    Finding(
                        userId: user, paymentSeq: message.paymentSeq, outcome: .failed,
                        detail: "its sighting was not recorded"))
                continue
            }
            // Both waits are measured so a step of the wall clock cannot cut them short: the sighting's against a
            // cutoff held back by a forward step, the intake's on the monotonic clock.
            let grace = configuration.grace
            let sightingCutoff = clock.wallCutoff(olderThan: grace)
            let processingFor = health.processingFor
            if firstSeen > sightingCutoff || processingFor.map({ $0 < grace }) ?? true {
                let takeAt = max(
                    firstSeen.addingTimeInterval(now.timeIntervalSince(sightingCutoff)),
                    now.addingTimeInterval((grace - (processingFor ?? .zero)).seconds))
                let seen =
                    sightings[message.paymentSeq] == nil
                    ? "not seen before (its grace starts now)" : "first seen \(RFC3339.string(firstSeen))"
                report.record(
                    Finding(
                        userId: user, paymentSeq: message.paymentSeq, outcome: .skippedGrace,
                        detail: "\(seen); taken from \(RFC3339.string(takeAt)) on"))
                continue
            }
            if options.dryRun {
                report.record(
                    Finding(
                        userId: user, paymentSeq: message.paymentSeq, outcome: .wouldTake,
                        detail: "unconsumed and ungranted since \(RFC3339.string(firstSeen)): a pass would take it"))
                continue
            }
            if try await take(input, message, report: &report) { decided.append(message.paymentSeq) }
        }
        // A decided payment needs no grace any more (best effort: a sighting left behind is pruned after the
        // lookback window).
        if !decided.isEmpty {
            let paymentSeqs = decided
            try? await reconciliation("reconciliation sightings cleanup") {
                try await $0.forgetReconciliationSightings(paymentSeqs: paymentSeqs)
            }
        }
    }

    /// Runs one payment through the flow, as the message its user never sent, and records what happened; returns
    /// whether the payment is decided now (granted or rejected, by this pass or meanwhile).
    private func take(_ input: PurchaseInput, _ message: PurchaseMessage, report: inout Report) async throws -> Bool {
        let finding = { (outcome: Outcome, detail: String) in
            Finding(userId: message.userId, paymentSeq: message.paymentSeq, outcome: outcome, detail: detail)
        }
        let metadata: Logger.Metadata = [
            "iap.payment_seq": "\(message.paymentSeq)", "iap.user_id": "\(message.userId)",
        ]
        let logGrant = { (pending: Bool) in
            var lineMetadata = metadata
            lineMetadata["iap.outcome"] = "granted"
            lineMetadata["iap.source"] = "reconciliation"
            if pending { lineMetadata["iap.consume_pending"] = "true" }
            logger.notice("reconciliation granted a payment no message reported", metadata: lineMetadata)
        }
        let outcome: PurchaseOutcome
        do {
            outcome = try await processor.process(input, parsed: .success(message), gate: { try await gate() })
        } catch let interrupted as Interrupted {
            // Held between the grant and its Consume: the grant stands (the sweeper consumes it) and is counted.
            if let grant = try? await processor.ledger.grant(paymentSeq: message.paymentSeq),
                grant.origin == .reconciliation,
                grant.userId.hasSameBytes(as: message.userId)
            {
                logGrant(true)
                report.record(finding(.granted, "granted; Consume pending (the sweeper retries it)"))
            }
            throw interrupted
        }
        switch outcome {
        case .granted(_, let pending):
            logGrant(pending)
            report.record(
                finding(
                    .granted, pending ? "granted; Consume pending (the sweeper retries it)" : "granted and consumed"))
            return true
        case .duplicate:
            report.record(finding(.alreadyGranted, "a message for it was handled meanwhile"))
            return true
        case .rejected(_, let reason):
            logger.info(
                "reconciliation rejected a listed payment",
                metadata: metadata.merging(["iap.outcome": "rejected", "iap.reason": "\(reason.rawValue)"]) { $1 })
            report.record(finding(.rejected, "rejected: \(reason.rawValue)"))
            return true
        case .gamebaseUnavailable(let error, _):
            report.record(finding(.failed, "Gamebase failed: \(error.message)"))
            try await judge(error)
            return false
        case .stop(let error, let durable):
            health.configurationRejected(error)
            if durable {
                // Granted; Consume met the configuration failure and waits for it (the sweeper's).
                logGrant(true)
                report.record(finding(.granted, "granted; Consume pending (the sweeper retries it)"))
            }
            throw Interrupted(
                reason: "Gamebase rejects the configuration"
                    + (durable ? " (after granting \(message.paymentSeq))" : ""),
                configurationRejected: true)
        case .malformed(let problem):
            report.record(finding(.failed, problem))
            return false
        }
    }

    /// After a Gamebase failure: a configuration failure or an outage ends the pass; anything else was this call's.
    private func judge(_ error: GamebaseError) async throws {
        switch error.kind {
        case .configuration:
            health.configurationRejected(error)
            throw Interrupted(reason: "Gamebase rejects the configuration", configurationRejected: true)
        case .transient:
            guard case .answers = await health.verdictAfterFailure() else {
                throw Interrupted(reason: "Gamebase does not answer")
            }
        case .permanent, .alreadyConsumed:
            return
        }
    }

    /// The `source` of a reconciled input: no record was read, and the ledger stores none for it.
    static let source = MessageSource(topic: "gamebase.list-consumables", partition: -1, offset: -1)
}
