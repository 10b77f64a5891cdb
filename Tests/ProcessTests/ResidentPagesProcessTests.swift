import Foundation
import IAPTestSupport
import Testing

@testable import SystemTestSupport

/// What a running worker keeps resident of the libraries it only needs in rare cases (issue #39).
@Suite("iap-worker run: ICU's tables stay unloaded", .serialized, .timeLimit(.minutes(4)))
struct ResidentPagesProcessTests {
    typealias Cluster = ProcessTests.Cluster

    /// ICU's resident pages in `pid` (Foundation's ICU is a library of its own in a dynamically linked build), in KiB;
    /// nil when no such library is mapped (a build with the Swift libraries linked in).
    static func icuResidentKiB(_ pid: Int32) throws -> Int? {
        // Read to its end: `String(contentsOfFile:)` stops after procfs's first page of it.
        let handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: "/proc/\(pid)/smaps"))
        defer { try? handle.close() }
        let smaps = String(decoding: try handle.readToEnd() ?? Data(), as: UTF8.self)
        var inICU = false
        var total: Int?
        for line in smaps.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            if let first = fields.first, first.contains("-"), first.allSatisfy({ $0.isHexDigit || $0 == "-" }) {
                inICU = fields.count >= 6 && fields[5].hasSuffix("/lib_FoundationICU.so")
                if inICU { total = total ?? 0 }
            } else if inICU, fields.first == "Rss:", fields.count >= 2, let kib = Int(fields[1]) {
                total = (total ?? 0) + kib
            }
        }
        return total
    }

    /// A worker that granted purchases, with its admin server answering, on a UTC system zone: neither
    /// ICU's IDNA tables (once loaded by the configuration's URL checks and the Gamebase client's host) nor its zone
    /// tables (once loaded by Hummingbird's Date-header calendar) are resident. The same worker on another zone,
    /// where Foundation needs ICU to know it, shows the measure sees the tables: it is the control.
    @Test(.tags(.librdkafka)) func aWorkerOnAUTCZoneHoldsNoneOfICUsIDNAOrZoneTables() async throws {
        var resident: [String: Int] = [:]
        for zone in ["Etc/UTC", "Asia/Seoul"] {
            // A cluster each: the purchases one worker consumed at Gamebase would be another's consumed elsewhere.
            let cluster = try await Cluster.start(purchases: 40, simulatorArguments: [])
            try await cluster.producePurchases()
            let ledgerURL = try await TestDatabases.freshLedgerURL(.sqlite)
            var environment = cluster.workerEnvironment(
                ledgerURL: ledgerURL, group: "icu-\(UUID().uuidString.prefix(6))", maxInFlight: 8)
            environment["TZ"] = zone
            environment["TZFILE"] = ""
            let worker = try cluster.worker("worker-\(zone.replacingOccurrences(of: "/", with: "-"))", environment)
            // What `run` decided, whatever the build: GMT for a UTC zone, the system's for another.
            let starting = try await worker.waitForLog("starting", within: 30)
            #expect(
                starting["foundation.time_zone"] as? String == (zone == "Etc/UTC" ? "GMT" : "system"),
                "\(zone): \(worker.diagnosticOutput)")
            try await cluster.waitUntilAllConsumed(within: 120, workers: [worker], ledgerURL: ledgerURL)
            let admin = "http://127.0.0.1:\(try await worker.adminPort())"
            #expect(try await httpGet("\(admin)/readyz").status == 200, "\(worker.diagnosticOutput)")
            guard let kib = try Self.icuResidentKiB(worker.pid) else {
                _ = try await worker.terminate()
                withKnownIssue("this build links the Swift libraries in: no ICU library to measure") {
                    Issue.record("lib_FoundationICU.so is not mapped")
                }
                return
            }
            resident[zone] = kib
            #expect(try await worker.terminate() == 0, "\(worker.diagnosticOutput)")
        }
        // Loading the library maps about 1 MiB; its IDNA tables added 1.3 MiB, its zone tables 1.8 (both 2.1).
        let utc = try #require(resident["Etc/UTC"])
        let seoul = try #require(resident["Asia/Seoul"])
        #expect(utc < 1_536, "ICU resident on UTC: \(utc) KiB (Asia/Seoul: \(seoul) KiB)")
        #expect(seoul >= utc + 512, "the control did not load the zone tables: UTC \(utc) KiB, Asia/Seoul \(seoul) KiB")
    }
}
