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
        #expect(URLComponents(string: "http://h%zz/x")?.hostAsWritten == nil)
        let long = String(repeating: "a", count: 8192)
        #expect(URLComponents(string: "https://\(long).example/")?.hostAsWritten == "\(long).example")
    }
}
