import Foundation

extension URLComponents {
    /// The host as the URL spells it, with percent-escapes decoded and a punycode label (`xn--…`) kept: what a
    /// resolver and a TLS handshake are given. For an ASCII host it is what `host` answers. `host` also turns punycode
    /// into Unicode, and its first use loads ICU's IDNA tables: about 1.3 MiB that stay resident for the process's life
    /// in a daemon that never meets such a name (issue #39).
    ///
    /// Nil, as for no host at all, where no resolver could take it: escapes that do not decode to UTF-8, anything but
    /// printable ASCII once decoded (a control character would reach a Host header, a NUL would cut the name short at
    /// the resolver but not in the TLS name), or more than 255 bytes (a DNS name has 253 at most; the rest is room for
    /// an IPv6 literal's brackets). An empty host stays empty.
    package var hostAsWritten: String? {
        guard let host = encodedHost?.removingPercentEncoding, host.utf8.count <= Self.maxHostBytes,
            host.utf8.allSatisfy({ (0x21...0x7E).contains($0) })
        else { return nil }
        return host
    }

    static let maxHostBytes = 255
}
