import Foundation
import IAPTestSupport
import KafkaTesting
import Synchronization
import Testing

/// The test suite's PostgreSQL is always one `scripts/test-postgres.sh` started: a port held by anything else is
/// either avoided or, when asked for, refused naming what holds it — never silently used.
@Suite("scripts/test-postgres.sh and ports it did not take", .serialized)
struct TestPostgresScriptTests {
    static let script = TestRepository.root.appendingPathComponent("scripts/test-postgres.sh").path

    /// Runs the script through `system(3)`: Foundation's `Process` missed the exit of a script whose child (the
    /// server) outlives it, and waited for ever.
    static func run(_ arguments: [String], environment: [String: String]) throws -> (
        status: Int32, out: String, err: String
    ) {
        let stem = FileManager.default.temporaryDirectory.appendingPathComponent("pg-script-\(UUID().uuidString)").path
        let assignments = environment.map { "\($0.key)='\($0.value)'" }.sorted().joined(separator: " ")
        let command =
            "\(assignments) /bin/bash '\(script)' \(arguments.joined(separator: " ")) >'\(stem).out' 2>'\(stem).err' </dev/null"
        let wait = system(command)
        let status = (wait >> 8) & 0xFF
        let out = (try? String(contentsOfFile: stem + ".out", encoding: .utf8)) ?? ""
        let err = (try? String(contentsOfFile: stem + ".err", encoding: .utf8)) ?? ""
        return (status, out, err)
    }

    /// A listening socket on a loopback port of the kernel's choosing, and its address.
    static func listener() throws -> (socket: Int32, address: sockaddr_in) {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = loopbackAddress(port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        try withUnsafeMutablePointer(to: &address) { pointer in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                guard bind(listener, $0, length) == 0, listen(listener, 1) == 0, getsockname(listener, $0, &length) == 0
                else {
                    close(listener)
                    throw TestSetupError(message: "cannot listen on loopback")
                }
            }
        }
        return (listener, address)
    }

    /// A folder of the script's own, and its removal: the server stopped (if one started), the data and TLS folders.
    static func scratchFolder() -> (path: String, remove: () -> Void) {
        let folder = "/tmp/iap-pg-script-\(UUID().uuidString.prefix(8))"
        return (
            folder,
            {
                _ = try? Self.run(["stop"], environment: ["IAP_TEST_POSTGRES_DIR": folder])
                try? FileManager.default.removeItem(atPath: folder)
                try? FileManager.default.removeItem(atPath: folder + "-tls")
            }
        )
    }

    @Test func aPortAskedForAndHeldByAnotherServerIsRefusedNamingIt() throws {
        // A listener that is not PostgreSQL at all, on a port of its own.
        let (listener, address) = try Self.listener()
        defer { close(listener) }
        let port = Int(UInt16(bigEndian: address.sin_port))
        let (folder, remove) = Self.scratchFolder()
        defer { remove() }
        let result = try Self.run(
            ["start"], environment: ["IAP_TEST_POSTGRES_PORT": "\(port)", "IAP_TEST_POSTGRES_DIR": folder])
        #expect(result.status != 0)
        #expect(result.out.isEmpty, "no URL of a server it did not start")
        #expect(result.err.contains("port \(port) is taken"), "\(result.err)")
    }

    /// A port in Linux's ephemeral range can be the local end of a client's connection, with nothing listening on it.
    /// PostgreSQL then binds 127.0.0.2 but not 127.0.0.1 and counts that as a start: a server that refused every
    /// test of a CI run. Such a port is taken too.
    @Test func aPortHeldByAConnectionsLocalEndIsTaken() throws {
        let (listener, listening) = try Self.listener()
        var address = listening
        let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer {
            close(client)
            close(listener)
        }
        var local = loopbackAddress(port: 0)
        // The client's own end on a port of its choosing (bound first), connected to the listener.
        try withUnsafeMutablePointer(to: &local) { pointer in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { localAddress in
                try withUnsafePointer(to: &address) { remote in
                    try remote.withMemoryRebound(to: sockaddr.self, capacity: 1) { remoteAddress in
                        var localLength = socklen_t(MemoryLayout<sockaddr_in>.size)
                        guard bind(client, localAddress, localLength) == 0,
                            getsockname(client, localAddress, &localLength) == 0,
                            connect(client, remoteAddress, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
                        else { throw TestSetupError(message: "cannot connect on loopback") }
                    }
                }
            }
        }
        let port = Int(UInt16(bigEndian: local.sin_port))
        let (folder, remove) = Self.scratchFolder()
        defer { remove() }
        let result = try Self.run(
            ["start"], environment: ["IAP_TEST_POSTGRES_PORT": "\(port)", "IAP_TEST_POSTGRES_DIR": folder])
        #expect(result.status != 0, "started on a port a connection holds: \(result.out)")
        #expect(result.out.isEmpty, "no URL of a server the tests cannot reach")
        #expect(result.err.contains("port \(port) is taken"), "\(result.err)")
    }

    @Test func theDefaultPortTakenByAnotherServerIsAvoided() throws {
        // Under `make test` the shared server holds the default port: a second folder's server must not report it.
        let shared = try PostgresTestServer.current().port
        let (folder, remove) = Self.scratchFolder()
        defer { remove() }
        let result = try Self.run(
            ["start"], environment: ["IAP_TEST_POSTGRES_DIR": folder, "IAP_TEST_POSTGRES_PORT": ""])
        #expect(result.status == 0, "\(result.err)")
        let url = result.out.trimmingCharacters(in: .whitespacesAndNewlines)
        let port = try #require(URLComponents(string: url)?.port)
        #expect(port != shared, "\(url) is the shared server's, which this folder's script did not start")
    }

    /// Two test runs that start the machine's server at the same moment (two checkouts, two `make check`s) share one
    /// server: the second waits for the first and is given its URL, rather than making the folder anew under it.
    @Test func twoStartsAtOnceShareOneServer() throws {
        let (folder, remove) = Self.scratchFolder()
        defer {
            remove()
            try? FileManager.default.removeItem(atPath: folder + ".lock")
        }
        let results = Mutex<[(status: Int32, out: String, err: String)]>([])
        DispatchQueue.concurrentPerform(iterations: 2) { _ in
            let result =
                (try? Self.run(["start"], environment: ["IAP_TEST_POSTGRES_DIR": folder, "IAP_TEST_POSTGRES_PORT": ""]))
                ?? (-1, "", "could not run the script")
            results.withLock { $0.append(result) }
        }
        let both = results.withLock { $0 }
        for result in both { #expect(result.status == 0, "\(result.err)") }
        let urls = Set(both.map { $0.out.trimmingCharacters(in: .whitespacesAndNewlines) })
        #expect(urls.count == 1, "\(urls)")
        let port = try #require(urls.first.flatMap { URLComponents(string: $0)?.port })
        // The server both were given listens on 127.0.0.1.
        let probe = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(probe) }
        var address = loopbackAddress(port: port)
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(probe, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        #expect(connected, "nothing answers on the URL both were given")
    }
}
