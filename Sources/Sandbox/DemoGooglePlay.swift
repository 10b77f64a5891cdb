import Foundation
import GooglePlayHTTP
import GooglePlaySimulator
import Logging
import _CryptoExtras

/// The demo's Google Play: the simulator of the Voided Purchases API and its token endpoint, in this process, and the
/// service account the demo's worker authenticates as.
struct DemoGooglePlay: Sendable {
    let state: GooglePlaySimulatorState
    let account: GoogleServiceAccount
    let url: String
    let task: Task<Void, any Error>

    static func start(logger: Logger) async throws -> DemoGooglePlay {
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let email = "iap-worker-demo@iap-worker-sim.iam.gserviceaccount.com"
        let state = GooglePlaySimulatorState(
            packageName: DemoBatch.packageName, clientEmail: email, keyId: "demo-key", publicKey: key.publicKey)
        let simulator = GooglePlaySimulator(configuration: .init(), state: state, logger: logger)
        let task = Task { try await simulator.run() }
        let account = GoogleServiceAccount(
            clientEmail: email, privateKeyId: "demo-key", tokenURI: await simulator.tokenURI(), privateKey: key)
        return DemoGooglePlay(state: state, account: account, url: await simulator.baseURL(), task: task)
    }

    func stop() { task.cancel() }
}
