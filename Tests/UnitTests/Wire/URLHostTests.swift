import Foundation
import Testing

@testable import Wire

/// `hostAsWritten`: the host a URL names, read without ICU's IDNA (issue #39), the same as `host` for every ASCII host.
@Suite("A URL's host as written")
struct URLHostTests {
    @Test func anASCIIHostIsWhatHostAnswers() {
        for url in [
            "https://api-gamebase.nhncloudservice.com/tcgb-inapp/v1.3", "http://127.0.0.1:8080/", "http://localhost",
            "postgres://u:p@[::1]:5432/db", "https://API.Example.COM/x", "https://u:p@h.example", "http://:80/x",
            "https://exa%6Dple.com/x", "http://[fe80::1%25eth0]:80/",
        ] {
            let components = URLComponents(string: url)
            #expect(components?.hostAsWritten == components?.host, "\(url)")
        }
    }

    @Test func punycodeIsKeptForTheResolverAndPercentEscapesAreDecoded() {
        #expect(URLComponents(string: "https://xn--bcher-kva.de/")?.hostAsWritten == "xn--bcher-kva.de")
        #expect(URLComponents(string: "https://%61pple.com/")?.hostAsWritten == "apple.com")
        #expect(URLComponents(string: "http:///x")?.hostAsWritten == "")
    }

    /// What no resolver could take is no host, as `host` said for most of it: escapes that are not UTF-8, control
    /// characters and spaces once decoded (a Host header's line break, a NUL that cuts the name at the resolver but
    /// not in the TLS name), non-ASCII, and more than 255 bytes.
    @Test func aHostNoResolverCouldTakeIsNone() throws {
        for url in [
            "https://gb.example%80/", "https://gb.example%ff/", "https://a%0d%0aX-Evil:%201@gb.example%0d%0a/",
            "https://gb%00.example/", "https://gb%20example/", "https://gb.%C3%A9xample/",
        ] {
            let components = try #require(URLComponents(string: url), "\(url) parses")
            #expect(components.hostAsWritten == nil, "\(url)")
        }
        let label = String(repeating: "a", count: 63)
        let longest = Array(repeating: label, count: 4).joined(separator: ".")  // 255 bytes
        #expect(URLComponents(string: "https://\(longest)/")?.hostAsWritten == longest)
        #expect(URLComponents(string: "https://\(longest)a/")?.hostAsWritten == nil)
        let huge = String(repeating: "a", count: 8192)
        #expect(URLComponents(string: "https://\(huge).example/")?.hostAsWritten == nil)
    }
}
