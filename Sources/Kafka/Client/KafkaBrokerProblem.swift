/// Why a client reaches a broker but cannot speak to it: a handshake or answer librdkafka cannot read, a request
/// version the broker does not serve, a failed authentication or TLS handshake. Retrying does not help; an operator
/// must change the client library, the broker or the credentials. An unreachable broker (refused, timed out, not
/// resolved) is none of these, nor is a connection closed by the other side (a plaintext client at a TLS listener
/// shows only as that): librdkafka retries them and the worker waits, as before.
public struct KafkaBrokerProblem: Sendable, Hashable, CustomStringConvertible {
    public enum Kind: String, Sendable, Hashable {
        /// The broker's answer could not be parsed (typically the ApiVersions handshake).
        case unreadableAnswer = "unreadable_answer"
        /// The broker does not serve a request version the client needs.
        case unsupportedVersion = "unsupported_version"
        /// SASL authentication failed.
        case authentication
        /// The TLS handshake failed (certificate, CA, host name).
        case tls
    }

    public let kind: Kind
    /// The broker as librdkafka names it (`host:port/id`, or `host:port/bootstrap` before the first metadata).
    public let broker: String
    /// The loaded librdkafka's version.
    public let librdkafkaVersion: String
    /// librdkafka's own words (they name brokers and properties, never a property's value).
    public let detail: String

    /// What the operator most likely has to change.
    public var likelyCause: String {
        switch kind {
        case .unreadableAnswer:
            let handshake = detail.lowercased().contains("apiversion") && detail.lowercased().contains("read underflow")
            if handshake, Librdkafka.Version(librdkafkaVersion)?.misreadsTaggedFields == true {
                return "librdkafka before 2.2.0 cannot read the handshake answer of newer brokers (librdkafka #4278): "
                    + "run librdkafka 2.8 or later (the image ships it; docs/compatibility.md)"
            }
            return "the broker answered in a form this librdkafka cannot read: check that the address is a Kafka "
                + "listener (not HTTP, not TLS for a plaintext client) and that the broker is one librdkafka supports "
                + "(docs/compatibility.md)"
        case .unsupportedVersion:
            return "the broker does not serve a request version librdkafka \(librdkafkaVersion) needs: the broker is "
                + "too old or too new for it (docs/compatibility.md)"
        case .authentication:
            return "the broker refused the credentials: check the sasl.* settings and the user's rights"
        case .tls:
            return "the TLS handshake failed: check ssl.ca.location and the broker's certificate"
        }
    }

    /// One line for the log, `/readyz` and `check-config`.
    public var description: String {
        "cannot speak to Kafka broker \(broker) with librdkafka \(librdkafkaVersion): \(likelyCause) "
            + "(librdkafka: \(detail))"
    }

    public init(kind: Kind, broker: String, librdkafkaVersion: String, detail: String) {
        self.kind = kind
        self.broker = broker
        self.librdkafkaVersion = librdkafkaVersion
        self.detail = detail
    }

    /// The problem librdkafka's error or log text `reason` reports, if it is one of these; `nil` for anything else,
    /// an unreachable broker included.
    ///
    /// - Parameter reason: an error callback's reason or a log line, `host:port/id: what happened (…)`.
    public static func recognise(_ reason: String, librdkafkaVersion: String = Librdkafka.versionString)
        -> KafkaBrokerProblem?
    {
        let text = reason.lowercased()
        // A connection the broker (or a proxy, a load balancer with no backend, a broker restarting) closed is no
        // evidence: librdkafka dresses a bare "Disconnected" up as a guess ("might be caused by incorrect
        // security.protocol", "broker might require SASL authentication") that is wrong as often as right.
        guard !text.contains("disconnected") else { return nil }
        let kind: Kind
        if text.contains("read underflow") || text.contains("protocol parse failure")
            || text.contains("bad message format") || text.contains("invalid response size")
        {
            kind = .unreadableAnswer
        } else if text.contains("unsupported version") || text.contains("unsupported_version") {
            kind = .unsupportedVersion
        } else if text.contains("sasl authentication error") || text.contains("authentication failed")
            || text.contains("unsupported sasl mechanism")
        {
            kind = .authentication
        } else if text.contains("ssl handshake failed") || text.contains("certificate verify failed") {
            kind = .tls
        } else {
            return nil
        }
        // What a broker sent (a SASL server's message, say) can hold anything: control characters become spaces, so
        // a line of the log or of /readyz stays one line.
        let said = Substring(printable(withoutThreadPrefix(reason)))
        return KafkaBrokerProblem(
            kind: kind, broker: brokerName(in: said), librdkafkaVersion: librdkafkaVersion,
            detail: String(said.prefix(300)))
    }

    /// `text` with every control character as a space.
    static func printable(_ text: Substring) -> String {
        String(
            String.UnicodeScalarView(text.unicodeScalars.map { $0.properties.generalCategory == .control ? " " : $0 }))
    }

    /// librdkafka's text without the `[thrd:…]: ` its log lines start with.
    static func withoutThreadPrefix(_ reason: String) -> Substring {
        let text = Substring(reason)
        guard text.hasPrefix("[thrd:"), let end = text.firstIndex(of: "]") else { return text }
        return text[text.index(after: end)...].drop { $0 == ":" || $0 == " " }
    }

    /// `host:port/id` from the start of librdkafka's text, or "unknown".
    static func brokerName(in rest: Substring) -> String {
        // `host:port/id: …`: the name ends at the first ": ".
        var index = rest.startIndex
        while index < rest.endIndex {
            let next = rest.index(after: index)
            if rest[index] == ":", next < rest.endIndex, rest[next] == " " { break }
            index = next
        }
        let end = index
        guard end < rest.endIndex, rest[..<end].contains("/"), !rest[..<end].contains(" ") else { return "unknown" }
        return String(rest[..<end].prefix(200))
    }
}
