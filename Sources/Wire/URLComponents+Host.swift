import Foundation

extension URLComponents {
    /// The host as the URL spells it, with percent-escapes decoded and a punycode label (`xn--…`) kept: what a
    /// resolver and a TLS handshake are given. For an ASCII host it is what `host` answers. `host` also turns punycode
    /// into Unicode, and its first use loads ICU's IDNA tables: about 1.3 MiB that stay resident for the process's life
    /// in a daemon that never meets such a name (issue #39).
    package var hostAsWritten: String? {
        encodedHost.map { $0.removingPercentEncoding ?? $0 }
    }
}
