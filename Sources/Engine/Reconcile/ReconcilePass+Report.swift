import Foundation

extension ReconcilePass {
    /// What a pass did with one payment Gamebase listed as unconsumed (the `outcome` of `iap_reconciled_total`).
    public enum Outcome: String, Sendable, Hashable, CaseIterable, Comparable {
        /// No message had reported it: granted now (its item-granted event says `"source": "reconciliation"`).
        case granted
        /// The ledger has its grant (a message won; Consume may still be pending, which is the sweeper's).
        case alreadyGranted = "already_granted"
        /// The ledger has the rejection of exactly this claim: nothing is asked of Gamebase again.
        case alreadyRejected = "already_rejected"
        /// The flow's checks refused it now (a subscription, a test purchase with `worker.reject_test_purchases`…).
        case rejected
        /// Seen unconsumed and ungranted for less than `reconcile.grace_ms`: its message may be on its way.
        case skippedGrace = "skipped_grace"
        /// It (or the user's list) could not be checked: a Gamebase or ledger failure. The next pass tries again.
        case failed
        /// `--dry-run` only: past its grace, a pass would take it now.
        case wouldTake = "would_take"

        public static func < (lhs: Self, rhs: Self) -> Bool {
            allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
        }

        /// The outcomes `iap_reconciled_total` counts (a dry run changes nothing, so it counts nothing).
        public static let counted: [Outcome] = [
            .granted, .alreadyGranted, .alreadyRejected, .rejected, .skippedGrace, .failed,
        ]
    }

    /// One line of what a pass found.
    public struct Finding: Sendable, Hashable {
        public var userId: String
        /// `nil` when the user's list itself could not be read.
        public var paymentSeq: String?
        public var outcome: Outcome
        public var detail: String
    }

    /// What one pass did.
    public struct Report: Sendable {
        /// Users whose unconsumed payments were listed.
        public var usersChecked = 0
        /// Users due in this pass that it did not reach before its deadline (they come first in the next one).
        public var usersLeft = 0
        /// Payments by outcome (a user whose list failed counts once as `failed`).
        public var outcomes: [Outcome: Int] = [:]
        public var findings: [Finding] = []
        /// Why the pass ended before checking every user, when it did.
        public var stoppedEarly: String?
        /// Gamebase refused the worker's configuration (the command exits non-zero): for Get Payment Transaction or
        /// Consume, which the message path shares (its monitor is told), or for List Consumables, which only ends
        /// this pass.
        public var configurationRejected = false
        /// The ledger, or Kafka publishing an event of the flow, failed and ended the pass (the command exits 2).
        public var dependencyFailed = false
        public var duration: Duration = .zero

        mutating func record(_ finding: Finding) {
            outcomes[finding.outcome, default: 0] += 1
            findings.append(finding)
        }

        public var payments: Int { outcomes.values.reduce(0, +) }
    }
}
