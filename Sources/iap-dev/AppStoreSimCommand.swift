import App
import AppStoreSimulator
import ArgumentParser
import Crypto
import Foundation
import Logging
import ServiceLifecycle
import UnixSignals

struct AppStoreSimCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "app-store-sim",
        abstract: "The App Store Server API simulator as an HTTP server: notification history and consumption answers.",
        discussion: """
            Makes an In-App Purchase key and a test certificate chain, writes the key (.p8) and the chain's root (PEM) \
            into --files, and prints the base URL, then the worker's environment variables for them (one per line), \
            so `iap-worker run` polls this simulator as it would poll Apple. Notifications are signed by the test \
            chain: the worker believes them only with REFUNDS_APPLE_ROOT_CERTIFICATES_FILE set to the root written. \
            While it runs, POST /admin/notifications with {"type": "REFUND", "transactionId": "…"} adds one \
            (REFUND, REFUND_REVERSED, REFUND_DECLINED or CONSUMPTION_REQUEST); GET /admin/consumptions lists the \
            consumption information received.
            """
    )

    @Option(help: "Port to listen on (0 picks a free one; the first line printed is the base URL).")
    var port: Int = 8090
    @Option(help: "Address to listen on.")
    var host: String = "127.0.0.1"
    @Option(name: .customLong("bundle-id"), help: "The app's bundle id (refunds.apple.bundle_id).")
    var bundleId: String
    @Option(help: "Folder the key and the root certificate are written to (created if missing).")
    var files: String
    @Option(name: .customLong("page-size"), help: "Notifications per history page.")
    var pageSize: Int = 20
    @Option(name: .customLong("refund"), help: "A transaction id refunded from the start (repeatable).")
    var refunds: [String] = []
    @Option(
        name: .customLong("consumption-request"),
        help: "A transaction id Apple asks consumption information about from the start (repeatable).")
    var consumptionRequests: [String] = []
    @Option(help: "The App Store environment: production (180 days of history) or sandbox (30 days).")
    var environment = "production"

    static let issuerId = "sim-issuer"
    static let keyId = "SIMKEY0001"

    func validate() throws {
        guard (0...65535).contains(port) else { throw ValidationError("--port must be between 0 and 65535") }
        guard (1...1_000).contains(pageSize) else { throw ValidationError("--page-size must be between 1 and 1000") }
        guard !bundleId.isEmpty else { throw ValidationError("--bundle-id must not be empty") }
        guard ["production", "sandbox"].contains(environment) else {
            throw ValidationError("--environment must be production or sandbox")
        }
    }

    func run() async throws {
        var logger = Logger(label: "iap-worker.app-store-sim")
        logger.logLevel = .warning
        let folder = URL(fileURLWithPath: files)
        let key = P256.Signing.PrivateKey()
        let chain = try AppleSigningChain(around: Date())
        let keyFile = folder.appendingPathComponent("AuthKey_\(Self.keyId).p8")
        let rootFile = folder.appendingPathComponent("app-store-sim-root.pem")
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            // The key is a secret: readable by its owner alone, as a real .p8 should be.
            guard
                FileManager.default.createFile(
                    atPath: keyFile.path, contents: Data(key.pemRepresentation.utf8),
                    attributes: [.posixPermissions: 0o600])
            else { throw ValidationError("cannot write \(keyFile.path)") }
            try Data(try chain.rootPEM.utf8).write(to: rootFile)
        } catch let error as ValidationError {
            throw error
        } catch {
            throw ValidationError("cannot write the key and the root into \(files): \(error)")
        }
        let state = AppStoreSimulatorState(
            chain: chain, bundleId: bundleId, environment: environment == "sandbox" ? "Sandbox" : "Production")
        for transactionId in consumptionRequests {
            try state.addNotification(type: "CONSUMPTION_REQUEST", transactionId: transactionId)
        }
        for transactionId in refunds {
            try state.addNotification(
                type: "REFUND", transactionId: transactionId, revocationDate: Date(), revocationReason: 1)
        }
        let simulator = AppStoreSimulator(
            configuration: .init(
                host: host, port: port, issuerId: Self.issuerId, keyId: Self.keyId, publicKey: key.publicKey,
                pageSize: pageSize), state: state, logger: logger)
        let variables = [
            ("REFUNDS_APPLE_BUNDLE_ID", bundleId), ("REFUNDS_APPLE_ISSUER_ID", Self.issuerId),
            ("REFUNDS_APPLE_KEY_ID", Self.keyId), ("REFUNDS_APPLE_PRIVATE_KEY_FILE", keyFile.path),
            ("REFUNDS_APPLE_ROOT_CERTIFICATES_FILE", rootFile.path), ("REFUNDS_APPLE_ENVIRONMENT", environment),
        ]
        // The base URL first, then the worker's variables (one per line).
        try await SimulatorAnnouncer.serve(simulator, logger: logger) {
            let url = await simulator.baseURL()
            return [url] + (variables + [("REFUNDS_APPLE_BASE_URL", url)]).map { "\($0)=\($1)" }
        }
    }
}
