import App
import ArgumentParser
import Foundation
import GooglePlaySimulator
import Logging
import _CryptoExtras

struct GooglePlaySimCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "google-play-sim",
        abstract: "Google Play's Voided Purchases API and Google's token endpoint as an HTTP server.",
        discussion: """
            Makes a service account with an RSA key, writes its JSON key file into --files once it listens (the \
            file's token_uri names this simulator), and prints the base URL, then the worker's environment variables \
            (one per line), so `iap-worker run` polls this simulator as it would poll Google. It holds Google's \
            limits: 30 days of voided purchases, 6,000 queries a day and 30 in any 30 seconds (then 429), tokens an \
            hour long. While it runs, POST /admin/voided with {"orderId": "GPA.…", "purchaseToken": "…"} \
            (voidedQuantity for a partial refund) voids a purchase now and answers the RTDN Google sends for it.
            """
    )

    @Option(help: "Port to listen on (0 picks a free one; the first line printed is the base URL).")
    var port: Int = 8091
    @Option(help: "Address to listen on.")
    var host: String = "127.0.0.1"
    @Option(name: .customLong("package-name"), help: "The app's package name (refunds.google.package_name).")
    var packageName: String
    @Option(help: "Folder the service account's key file is written to (created if missing).")
    var files: String
    @Option(name: .customLong("page-size"), help: "Voided purchases per page at most.")
    var pageSize: Int = 1_000
    @Option(name: .customLong("voided"), help: "ORDER_ID:PURCHASE_TOKEN voided from the start (repeatable).")
    var voided: [String] = []

    static let clientEmail = "iap-worker@iap-worker-sim.iam.gserviceaccount.com"

    func validate() throws {
        guard (0...65535).contains(port) else { throw ValidationError("--port must be between 0 and 65535") }
        guard (1...1_000).contains(pageSize) else { throw ValidationError("--page-size must be between 1 and 1000") }
        guard !packageName.isEmpty else { throw ValidationError("--package-name must not be empty") }
        for entry in voided where entry.split(separator: ":", maxSplits: 1).count != 2 {
            throw ValidationError("--voided takes ORDER_ID:PURCHASE_TOKEN, not \(entry)")
        }
    }

    func run() async throws {
        var logger = Logger(label: "iap-worker.google-play-sim")
        logger.logLevel = .warning
        let folder = URL(fileURLWithPath: files)
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        } catch {
            throw ValidationError("cannot create \(files): \(error)")
        }
        let keyFile = folder.appendingPathComponent("google-play-sim-service-account.json")
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let keyId = String(UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(40))
        let state = GooglePlaySimulatorState(
            packageName: packageName, clientEmail: Self.clientEmail, keyId: keyId, publicKey: key.publicKey)
        for entry in voided {
            let parts = entry.split(separator: ":", maxSplits: 1).map(String.init)
            state.add(.init(orderId: parts[0], purchaseToken: parts[1], voidedTime: Date()))
        }
        let simulator = GooglePlaySimulator(
            configuration: .init(host: host, port: port, pageSize: pageSize), state: state, logger: logger)
        let package = packageName
        try await SimulatorAnnouncer.serve(simulator, logger: logger) {
            let url = await simulator.baseURL()
            let json = GooglePlaySimulatorState.serviceAccountKey(
                clientEmail: Self.clientEmail, keyId: keyId, privateKey: key, tokenURI: await simulator.tokenURI())
            // The key is a secret: readable by its owner alone, as a downloaded key file should be.
            try? FileManager.default.removeItem(at: keyFile)
            guard
                FileManager.default.createFile(
                    atPath: keyFile.path, contents: Data(json.utf8), attributes: [.posixPermissions: 0o600])
            else { return [url, "error: cannot write \(keyFile.path)"] }
            return [
                url, "REFUNDS_GOOGLE_PACKAGE_NAME=\(package)", "REFUNDS_GOOGLE_SERVICE_ACCOUNT_FILE=\(keyFile.path)",
                "REFUNDS_GOOGLE_BASE_URL=\(url)",
            ]
        }
    }
}
