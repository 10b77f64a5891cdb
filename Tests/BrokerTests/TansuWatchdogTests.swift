import Foundation
import IAPTestSupport
import KafkaTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A test broker outlives no test process: the watchdog that runs it stops it when the process that started it dies,
/// however it dies.
@Suite("The test broker's watchdog", .timeLimit(.minutes(1)))
struct TansuWatchdogTests {
    @Test func aBrokerWhoseStarterIsKilledIsStopped() async throws {
        // The starter (a stand-in for a test process) and the "broker" (a long sleep), under the watchdog. The starter
        // is no child of this process (its shell exits at once), so once killed it is reaped by init and gone, as a
        // killed test process is once `swift test` reaps it.
        let starterFile = FileManager.default.temporaryDirectory.appendingPathComponent("starter-\(UUID().uuidString)")
        let spawn = Process()
        spawn.executableURL = URL(fileURLWithPath: "/bin/sh")
        spawn.arguments = ["-c", "sleep 300 </dev/null >/dev/null 2>&1 & echo $! > \(starterFile.path)"]
        try spawn.run()
        // Waited for by its file, not its exit: Foundation sees a process end only once every process holding its
        // exit-notification descriptor has, and the background sleep inherits it.
        let starter = try #require(try await Self.pid(in: starterFile))
        let pidFile = FileManager.default.temporaryDirectory.appendingPathComponent("watchdog-\(UUID().uuidString)")
        let watchdog = Process()
        watchdog.executableURL = URL(fileURLWithPath: "/bin/sh")
        watchdog.arguments = [
            "-c", TansuBroker.watchdog, "tansu-watchdog", String(starter), pidFile.path, "/bin/sleep", "300",
        ]
        try watchdog.run()
        let broker = try #require(try await Self.pid(in: pidFile))
        #expect(kill(broker, 0) == 0, "the broker runs")

        kill(starter, SIGKILL)
        let stopped = await eventually(within: 10) { kill(broker, 0) != 0 }
        #expect(stopped, "the broker is gone within ten seconds of its starter (a fifth of a second when idle)")
        // The watchdog ends too: it holds the test runner's output pipes, and `swift test` waits for them to close.
        let ended = await eventually(within: 10) { !watchdog.isRunning }
        #expect(ended, "the watchdog ends once its broker is dead")
        if !ended { kill(watchdog.processIdentifier, SIGKILL) }
        try? FileManager.default.removeItem(at: pidFile)
        try? FileManager.default.removeItem(at: starterFile)
    }

    @Test func stopEndsTheBrokerAndItsWatchdog() async throws {
        let broker = try TansuBroker()
        let pid = try #require(broker.brokerProcessIdentifier)
        #expect(kill(pid, 0) == 0, "the broker runs")
        broker.stop()
        #expect(!broker.watchdogIsRunning, "the watchdog has ended when stop returns")
        let gone = await eventually(within: 10) { kill(pid, 0) != 0 }
        #expect(gone, "the broker is gone")
    }

    @Test func aBrokerThatEndedOnItsOwnEndsItsWatchdogAndStopSignalsNothing() async throws {
        let broker = try TansuBroker()
        let pid = try #require(broker.brokerProcessIdentifier)
        kill(pid, SIGKILL)
        let ended = await eventually(within: 10) { !broker.watchdogIsRunning }
        #expect(ended, "the watchdog ends with its broker")
        // Its pid may be anyone's now: stop only removes the file the ended watchdog watched.
        broker.stop()
        #expect(broker.brokerProcessIdentifier == nil)
    }

    /// The pid written to `file`, once it is there (10 s at most).
    static func pid(in file: URL) async throws -> Int32? {
        func written() -> Int32? {
            (try? String(contentsOf: file, encoding: .utf8)).flatMap {
                Int32($0.trimmingCharacters(in: .whitespacesAndNewlines))
            }
        }
        _ = await eventually(within: 10) { written() != nil }
        return written()
    }
}
