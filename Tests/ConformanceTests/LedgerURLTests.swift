import Fulfilment
import Ledger
import Testing

@Suite struct LedgerURLTests {
    @Test func sqliteAndPostgresURLsParse() throws {
        #expect(try LedgerURL("sqlite:///var/lib/iap/ledger.sqlite") == .sqlite(path: "/var/lib/iap/ledger.sqlite"))
        #expect(
            try LedgerURL("postgres://iap:p%40ss@db.internal:6543/ledger")
                == .postgres(
                    PostgresLedgerURL(
                        host: "db.internal", port: 6543, username: "iap", password: "p@ss", database: "ledger",
                        sslMode: .verifyFull)))
        #expect(
            try LedgerURL("postgresql://iap@localhost/ledger")
                == .postgres(
                    PostgresLedgerURL(
                        host: "localhost", username: "iap", password: nil, database: "ledger", sslMode: .disable)))
    }

    @Test func aPercentEncodedPercentSignInThePasswordIsDecodedOnce() throws {
        guard case .postgres(let url) = try LedgerURL("postgres://iap:p%2541ss@db/ledger") else {
            Issue.record("not a postgres URL")
            return
        }
        #expect(url.password == "p%41ss")
    }

    @Test(arguments: [
        "", "sqlite://relative.db", "mysql://x@y/z", "postgres://host/db", "postgres://u@host", "postgres://u:p@/db",
    ])
    func badURLsAreRefusedClearly(text: String) {
        let error = #expect(throws: LedgerError.self) { try LedgerURL(text) }
        #expect(error?.code == .invalidURL)
    }

    @Test func thePasswordIsNeverShown() throws {
        let url = try LedgerURL("postgres://iap:hunter2@db:5432/ledger")
        #expect("\(url)" == "postgres://iap:<redacted>@db:5432/ledger?sslmode=verify-full")
    }

    /// Without sslmode: verify-full, unless nothing leaves the machine.
    @Test(arguments: [
        ("db.internal", "verify-full"), ("10.0.0.7", "verify-full"), ("[2001:db8::1]", "verify-full"),
        ("128.0.0.1", "verify-full"), ("localhost.example", "verify-full"),
        ("localhost", "disable"), ("LOCALHOST", "disable"), ("127.0.0.1", "disable"), ("127.1.2.3", "disable"),
        ("[::1]", "disable"), ("[0:0:0:0:0:0:0:1]", "disable"),
    ])
    func theDefaultSSLModeIsVerifyFullExceptOnLoopback(host: String, expected: String) throws {
        let url = try LedgerURL("postgres://iap:secret@\(host):5432/ledger")
        #expect("\(url)".hasSuffix("/ledger?sslmode=\(expected)"), "\(url)")
    }

    @Test(arguments: ["disable", "require", "verify-full"])
    func theSupportedSSLModesAreKeptAsGiven(mode: String) throws {
        for host in ["localhost", "db.internal"] {
            let url = try LedgerURL("postgres://iap:secret@\(host)/ledger?sslmode=\(mode)")
            #expect("\(url)" == "postgres://iap:<redacted>@\(host):5432/ledger?sslmode=\(mode)")
        }
    }

    @Test func aRootCertificateFileIsShownAndImpliesVerifyFull() throws {
        let url = try LedgerURL("postgres://iap:secret@localhost/ledger?sslrootcert=/etc/iap/ca.pem")
        #expect(
            "\(url)"
                == "postgres://iap:<redacted>@localhost:5432/ledger?sslmode=verify-full&sslrootcert=/etc/iap/ca.pem")
        let system = try LedgerURL("postgres://iap:secret@localhost/ledger?sslmode=verify-full&sslrootcert=system")
        #expect("\(system)" == "postgres://iap:<redacted>@localhost:5432/ledger?sslmode=verify-full")
    }

    /// `prefer` and `allow` fall back to clear text when TLS is refused; `verify-ca` does not check the host name.
    @Test(arguments: ["prefer", "allow", "verify-ca", "Require", "on", ""])
    func otherSSLModesAreRefusedNamingTheKeyAndTheSupportedModes(mode: String) {
        let error = #expect(throws: LedgerError.self) {
            try LedgerURL("postgres://iap:hunter2@db/ledger?sslmode=\(mode)")
        }
        #expect(error?.code == .invalidURL)
        let text = "\(error.map { "\($0)" } ?? "")"
        #expect(text.contains("ledger.url"))
        #expect(!text.contains("hunter2"))
        if !mode.isEmpty { #expect(text.contains("disable, require, verify-full"), "\(text)") }
        if mode == "prefer" { #expect(text.contains("unencrypted")) }
    }

    @Test(arguments: [
        "postgres://iap:hunter2@db/ledger?sslmode=require&sslrootcert=/ca.pem",
        "postgres://iap:hunter2@db/ledger?sslmode=disable&sslrootcert=/ca.pem",
        "postgres://iap:hunter2@db/ledger?sslcert=/client.pem",
        "postgres://iap:hunter2@db/ledger?sslmode=require&sslmode=disable",
        "postgres://iap:hunter2@db/ledger?password=hunter2",
    ])
    func contradictoryOrUnknownParametersAreRefusedWithoutThePassword(text: String) {
        let error = #expect(throws: LedgerError.self) { try LedgerURL(text) }
        #expect(error?.code == .invalidURL)
        #expect(!"\(error.map { "\($0)" } ?? "")".contains("hunter2"))
    }
}
