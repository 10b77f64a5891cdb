import CRdKafka

/// The librdkafka this process loaded (not the one it was built against: `LD_LIBRARY_PATH` or a newer system package
/// can put another `librdkafka.so.1` of the same C ABI in its place), and every decision that depends on its version,
/// made here at run time and nowhere else.
public enum Librdkafka {
    /// `rd_kafka_version()`: 0xMMmmrrxx (major, minor, revision, pre-release; 0xff for a final release).
    public static let version = UInt32(bitPattern: rd_kafka_version())

    /// `rd_kafka_version_str()`, e.g. "2.0.2".
    public static let versionString = String(cString: rd_kafka_version_str())

    /// Whether the loaded version is `major.minor.revision` or later (final releases; a pre-release of that version
    /// counts as earlier).
    public static func isAtLeast(_ major: UInt32, _ minor: UInt32, _ revision: UInt32) -> Bool {
        version >= (major << 24 | minor << 16 | revision << 8 | 0xff)
    }

    /// Before 2.3.0, destroying a cooperative-sticky consumer whose JoinGroup chose the assignor but whose first
    /// assignment has not arrived aborts in `rd_kafka_sticky_assignor_state_destroy` (librdkafka #4312, fixed by #4381):
    /// such a handle is kept until the process exits instead.
    public static var assignorStateBugApplies: Bool { !isAtLeast(2, 3, 0) }

    /// Before 2.2.0, librdkafka skips one byte too few of each tagged field of a flexible-version answer, so it cannot
    /// read the ApiVersions v3 answer of newer brokers (Tansu, among others) and never finishes the handshake
    /// (librdkafka #4278).
    public static var misreadsTaggedFields: Bool { !isAtLeast(2, 2, 0) }

    /// The next-generation consumer group protocol (KIP-848, `group.protocol=consumer`): production-ready from 2.12.0
    /// (earlier releases know the property as early access or preview).
    public static var consumerGroupProtocolIsGA: Bool { isAtLeast(2, 12, 0) }
}
