import CRdKafka

/// The librdkafka this process loaded (not the one it was built against: `LD_LIBRARY_PATH` or a newer system package
/// can put another `librdkafka.so.1` of the same C ABI in its place), and every decision that depends on its version,
/// made here at run time and nowhere else.
public enum Librdkafka {
    /// A librdkafka release, `major.minor.revision`, and what it does or lacks.
    public struct Version: Sendable, Hashable, Comparable, CustomStringConvertible {
        public let major: Int
        public let minor: Int
        public let revision: Int

        public init(_ major: Int, _ minor: Int, _ revision: Int) {
            self.major = major
            self.minor = minor
            self.revision = revision
        }

        /// `rd_kafka_version()`'s 0xMMmmrrxx (major, minor, revision, pre-release): the release numbers (a release
        /// candidate is taken for its release).
        init(bits: UInt32) {
            self.init(Int(bits >> 24), Int(bits >> 16 & 0xff), Int(bits >> 8 & 0xff))
        }

        /// `"2.0.2"`, `"2.16.0-RC1"`: the first three numbers; `nil` for anything else.
        public init?(_ text: String) {
            let numbers = text.split(separator: ".", maxSplits: 2).map { Int($0.prefix { $0.isNumber }) }
            guard numbers.count == 3, let major = numbers[0], let minor = numbers[1], let revision = numbers[2] else {
                return nil
            }
            self.init(major, minor, revision)
        }

        public var description: String { "\(major).\(minor).\(revision)" }

        public static func < (a: Version, b: Version) -> Bool {
            (a.major, a.minor, a.revision) < (b.major, b.minor, b.revision)
        }

        /// Before 2.3.0, destroying a cooperative-sticky consumer whose JoinGroup chose the assignor but whose first
        /// assignment has not arrived aborts in `rd_kafka_sticky_assignor_state_destroy` (librdkafka #4312, fixed by
        /// #4381): such a handle is kept until the process exits instead.
        public var assignorStateBugApplies: Bool { self < Version(2, 3, 0) }

        /// Before 2.2.0, librdkafka skips one byte too few of each tagged field of a flexible-version answer, so it
        /// cannot read the ApiVersions v3 answer of newer brokers (Tansu, among others) and never finishes the
        /// handshake (librdkafka #4278).
        public var misreadsTaggedFields: Bool { self < Version(2, 2, 0) }

        /// The next-generation consumer group protocol (KIP-848, `group.protocol=consumer`): unknown before 2.4.0,
        /// early access or preview until 2.12.0, production-ready from it.
        public var knowsConsumerGroupProtocol: Bool { self >= Version(2, 4, 0) }
        public var consumerGroupProtocolIsGA: Bool { self >= Version(2, 12, 0) }

        /// From 2.2.0 a partition whose consumer queue is over `queued.min.messages` or `queued.max.messages.kbytes`
        /// is not fetched again for `fetch.queue.backoff.ms` (1,000 unless set; unknown before, where it is fetched
        /// again when its broker thread next wakes, within a second).
        public var knowsFetchQueueBackoff: Bool { self >= Version(2, 2, 0) }
    }

    /// The loaded release (`rd_kafka_version()`).
    public static let version = Version(bits: UInt32(bitPattern: rd_kafka_version()))

    /// `rd_kafka_version_str()`, e.g. "2.0.2".
    public static let versionString = String(cString: rd_kafka_version_str())

    public static var assignorStateBugApplies: Bool { version.assignorStateBugApplies }
    public static var misreadsTaggedFields: Bool { version.misreadsTaggedFields }
    public static var consumerGroupProtocolIsGA: Bool { version.consumerGroupProtocolIsGA }
}
