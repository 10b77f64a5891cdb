import Foundation

/// What the worker reports of itself to the surfaces people read (the console): the same truth `/readyz` and
/// `/metrics` give, read from the engine's health and metrics (never from its internals). Counts are cumulative since
/// the process started; the console makes windows of them.
public struct WorkerStatus: Sendable, Hashable, Codable {
    public struct PartitionLag: Sendable, Hashable, Codable {
        public var topic: String
        public var partition: Int32
        public var lag: Int64

        public init(topic: String, partition: Int32, lag: Int64) {
            self.topic = topic
            self.partition = partition
            self.lag = lag
        }
    }

    /// The last reconciliation pass this instance ran.
    public struct ReconcilePass: Sendable, Hashable, Codable {
        public var endedAt: Date
        public var durationSeconds: Double
        public var usersChecked: Int
        public var usersLeft: Int
        /// Payments by outcome (`granted`, `already_granted`, `skipped_grace`, …).
        public var outcomes: [String: Int]
        /// Why it ended before checking every due user, if it did.
        public var stoppedEarly: String?

        public init(
            endedAt: Date, durationSeconds: Double, usersChecked: Int, usersLeft: Int, outcomes: [String: Int],
            stoppedEarly: String?
        ) {
            self.endedAt = endedAt
            self.durationSeconds = durationSeconds
            self.usersChecked = usersChecked
            self.usersLeft = usersLeft
            self.outcomes = outcomes
            self.stoppedEarly = stoppedEarly
        }
    }

    /// One line of the configuration summary (secrets never: the ledger URL without its password).
    public struct Setting: Sendable, Hashable, Codable {
        public var key: String
        public var value: String

        public init(_ key: String, _ value: String) {
            self.key = key
            self.value = value
        }
    }

    public var version: String
    /// This instance's name (`kafka.group_instance_id` or the host name).
    public var instance: String
    /// `/readyz`: its status and its text.
    public var ready: Bool
    public var readiness: String
    /// `/healthz`.
    public var live: Bool
    public var liveness: String
    public var circuitOpen: Bool
    public var ledgerReachable: Bool
    /// Why consumption is stopped by a configuration failure (Gamebase refusing the app id or key), if it is.
    public var stoppedBy: String?
    public var inFlight: Int
    /// Of the partitions this instance is assigned, from librdkafka's statistics (every 5 s).
    public var consumerLag: [PartitionLag]
    /// From the sweeper's last pass; `nil` before it.
    public var unconsumedGrants: Int?
    public var oldestUnconsumedGrantAgeSeconds: Double?
    /// Revoked grants whose Consume Gamebase refuses for good, set aside (not retried); from the sweeper's last pass.
    public var setAsideGrants: Int?
    /// Purchase messages by outcome (`iap_purchases_total`), rejections and dead letters by reason.
    public var outcomes: [String: Int]
    public var rejections: [String: Int]
    public var deadLetters: [String: Int]
    public var reconciliationEnabled: Bool
    public var lastReconcilePass: ReconcilePass?
    public var settings: [Setting]

    public init(
        version: String, instance: String, ready: Bool, readiness: String, live: Bool, liveness: String,
        circuitOpen: Bool, ledgerReachable: Bool, stoppedBy: String?, inFlight: Int, consumerLag: [PartitionLag],
        unconsumedGrants: Int?, oldestUnconsumedGrantAgeSeconds: Double?, outcomes: [String: Int],
        rejections: [String: Int], deadLetters: [String: Int], reconciliationEnabled: Bool,
        lastReconcilePass: ReconcilePass?, settings: [Setting], setAsideGrants: Int? = nil
    ) {
        self.setAsideGrants = setAsideGrants
        self.version = version
        self.instance = instance
        self.ready = ready
        self.readiness = readiness
        self.live = live
        self.liveness = liveness
        self.circuitOpen = circuitOpen
        self.ledgerReachable = ledgerReachable
        self.stoppedBy = stoppedBy
        self.inFlight = inFlight
        self.consumerLag = consumerLag
        self.unconsumedGrants = unconsumedGrants
        self.oldestUnconsumedGrantAgeSeconds = oldestUnconsumedGrantAgeSeconds
        self.outcomes = outcomes
        self.rejections = rejections
        self.deadLetters = deadLetters
        self.reconciliationEnabled = reconciliationEnabled
        self.lastReconcilePass = lastReconcilePass
        self.settings = settings
    }
}

/// Where the surfaces read the worker's status: the composition root implements it over the engine's health and
/// metrics.
public protocol WorkerStatusSource: Sendable {
    func workerStatus() -> WorkerStatus
}
