import Foundation
import Fulfilment

/// The CloudEvent ids the worker gives its events (DESIGN §2), read back.
public enum EventIdentifier: Sendable, Hashable {
    case paymentSeq(String)
    /// A malformed message's consume-failed event: where the message was read.
    case malformed(MessageSource)

    public init?(_ id: String) {
        if id.hasSuffix(":item-granted") {
            let seq = String(id.dropLast(":item-granted".count))
            guard !seq.isEmpty else { return nil }
            self = .paymentSeq(seq)
            return
        }
        guard let marker = id.range(of: ":consume-failed") else { return nil }
        let head = String(id[..<marker.lowerBound])
        let tail = id[marker.upperBound...]
        guard !head.isEmpty, tail.isEmpty || tail.hasPrefix(":") else { return nil }
        if tail.isEmpty {
            // `<topic>/<partition>/<offset>:consume-failed`: topic names hold no '/', so the last two parts are numbers.
            let parts = head.split(separator: "/", omittingEmptySubsequences: false)
            if parts.count == 3, let partition = Int32(parts[1]), partition >= 0, let offset = Int64(parts[2]),
                offset >= 0
            {
                self = .malformed(MessageSource(topic: String(parts[0]), partition: partition, offset: offset))
                return
            }
        }
        self = .paymentSeq(head)
    }
}
