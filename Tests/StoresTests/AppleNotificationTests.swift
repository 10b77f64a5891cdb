import Crypto
import Foundation
import SwiftASN1
import Testing
import X509

@testable import Stores

/// An App Store notification is believed only when its JWS and its transaction's JWS verify to a trusted root, with
/// Apple's markers, for the configured app and environment; everything else is refused saying why.
@Suite("App Store notifications")
struct AppleNotificationTests {
    static let bundleId = "com.studio.game"
    static let signedMillis: Int64 = 1_764_000_000_000

    static func transaction(
        bundleId: String = bundleId, environment: String = "Production", revoked: Bool = true
    ) -> String {
        """
        {"transactionId":"2000000123456789","originalTransactionId":"2000000123456789","bundleId":"\(bundleId)",
         "productId":"gems.5000","type":"Consumable","quantity":1,"purchaseDate":1763000000000,
         "environment":"\(environment)","price":99000,"currency":"USD","signedDate":\(signedMillis)\(
            revoked ? #","revocationDate":1763990000000,"revocationReason":0"# : "")}
        """
    }

    static func notification(
        type: String = "REFUND", bundleId: String = bundleId, environment: String = "Production",
        signedTransaction: String?
    ) -> String {
        let transactionMember = signedTransaction.map { #","signedTransactionInfo":"\#($0)""# } ?? ""
        return """
            {"notificationType":"\(type)","notificationUUID":"9b4a1e7e-1111-4d5c-9c3a-000000000001",
             "version":"2.0","signedDate":\(signedMillis),
             "data":{"bundleId":"\(bundleId)","environment":"\(environment)"\(transactionMember)}}
            """
    }

    static func read(
        _ chain: AppleTestChain, type: String = "REFUND", transaction: String = transaction(),
        outerBundle: String = bundleId, outerEnvironment: String = "Production", verifier: AppleJWSVerifier? = nil
    ) async throws -> Result<StoreNotification, StoreNotificationError> {
        let signedTransaction = try chain.sign(transaction)
        let payload = try chain.sign(
            notification(
                type: type, bundleId: outerBundle, environment: outerEnvironment, signedTransaction: signedTransaction))
        do {
            return .success(
                try await AppleNotification.read(
                    signedPayload: payload, verifier: verifier ?? chain.verifier, bundleId: bundleId,
                    environment: .production))
        } catch {
            return .failure(error)
        }
    }

    @Test func theBuiltInRootIsApplesRootCAG3() throws {
        let root = try AppleRootCertificates.rootCAG3()
        var serializer = DER.Serializer()
        try serializer.serialize(root)
        let fingerprint = SHA256.hash(data: serializer.serializedBytes).map { String(format: "%02x", $0) }.joined()
        #expect(fingerprint == "63343abfb89a6a03ebb57e9b3f5fa7be7c4f5c756f3017b3a8c488c3653e9179")
        #expect("\(root.subject)".contains("Apple Root CA - G3"))
    }

    @Test func aVerifiedRefundNamesItsTransactionAndWhenItWasRevoked() async throws {
        let chain = try AppleTestChain()
        let read = try await Self.read(chain).get()
        #expect(read.store == .apple)
        #expect(read.kind == .refund)
        #expect(read.storeType == "REFUND")
        #expect(read.notificationId == "9b4a1e7e-1111-4d5c-9c3a-000000000001")
        #expect(read.paymentId == "2000000123456789")
        #expect(read.productId == "gems.5000")
        #expect(read.application == Self.bundleId)
        #expect(read.environment == "Production")
        #expect(read.reason == "revocationReason 0")
        #expect(read.occurredAt == Date(timeIntervalSince1970: 1_763_990_000))
    }

    @Test(arguments: [
        ("REFUND_REVERSED", StoreNotification.Kind.refundReversed),
        ("REFUND_DECLINED", .refundDeclined),
        ("CONSUMPTION_REQUEST", .consumptionRequest),
        ("DID_CHANGE_RENEWAL_STATUS", .other),
    ])
    func eachTypeIsReadAsItsKind(type: String, kind: StoreNotification.Kind) async throws {
        let chain = try AppleTestChain()
        let read = try await Self.read(chain, type: type, transaction: Self.transaction(revoked: false)).get()
        #expect(read.kind == kind)
        #expect(read.storeType == type)
        #expect(read.occurredAt == Date(timeIntervalSince1970: Double(Self.signedMillis) / 1_000))
    }

    @Test func aNotificationWithoutATransactionIsOtherUnlessItsTypeNeedsOne() async throws {
        let chain = try AppleTestChain()
        let test = try chain.sign(Self.notification(type: "TEST", signedTransaction: nil))
        let read = try await AppleNotification.read(
            signedPayload: test, verifier: chain.verifier, bundleId: Self.bundleId, environment: .production)
        #expect(read.kind == .other)
        let refund = try chain.sign(Self.notification(type: "REFUND", signedTransaction: nil))
        await #expect(throws: StoreNotificationError.self) {
            try await AppleNotification.read(
                signedPayload: refund, verifier: chain.verifier, bundleId: Self.bundleId, environment: .production)
        }
    }

    @Test func aChainToAnotherRootIsRefused() async throws {
        let chain = try AppleTestChain()
        let stranger = try AppleTestChain(name: "Stranger")
        let result = try await Self.read(chain, verifier: stranger.verifier)
        #expect(Self.code(result) == .unverified)
        // Nor does Apple's own root accept a chain of ours.
        #expect(Self.code(try await Self.read(chain, verifier: try AppleJWSVerifier())) == .unverified)
    }

    @Test func aChainWithoutApplesMarkersIsRefused() async throws {
        #expect(Self.code(try await Self.read(try AppleTestChain(leafMarked: false))) == .unverified)
        #expect(Self.code(try await Self.read(try AppleTestChain(intermediateMarked: false))) == .unverified)
    }

    @Test func aLeafNotValidWhenThePayloadWasSignedIsRefused() async throws {
        let signedAt = Date(timeIntervalSince1970: Double(Self.signedMillis) / 1_000)
        let expired = try AppleTestChain(
            validFrom: signedAt.addingTimeInterval(-86_400 * 60), validUntil: signedAt.addingTimeInterval(-86_400))
        #expect(Self.code(try await Self.read(expired)) == .unverified)
        // Valid then, expired now: still evidence.
        let then = try AppleTestChain(
            validFrom: signedAt.addingTimeInterval(-86_400), validUntil: signedAt.addingTimeInterval(86_400))
        #expect(Self.code(try await Self.read(then)) == nil)
    }

    @Test func aSignatureOverOtherBytesOrByAnotherKeyIsRefused() async throws {
        let chain = try AppleTestChain()
        let payload = try chain.sign(Self.notification(signedTransaction: try chain.sign(Self.transaction())))
        let parts = payload.split(separator: ".").map(String.init)
        let altered = try chain.sign(Self.notification(type: "TEST", signedTransaction: nil)).split(separator: ".")
        let swapped = [parts[0], String(altered[1]), parts[2]].joined(separator: ".")
        let byAnother = try chain.sign(
            Self.notification(signedTransaction: try chain.sign(Self.transaction())), key: P256.Signing.PrivateKey())
        for jws in [swapped, byAnother] {
            await #expect(throws: StoreNotificationError.self) {
                try await AppleNotification.read(
                    signedPayload: jws, verifier: chain.verifier, bundleId: Self.bundleId, environment: .production)
            }
        }
    }

    @Test(arguments: ["none", "HS256", "RS256", "ES384"])
    func anAlgorithmOtherThanES256IsRefused(algorithm: String) async throws {
        let chain = try AppleTestChain()
        let jws = try chain.sign(Self.notification(signedTransaction: nil), algorithm: algorithm)
        do {
            _ = try await AppleNotification.read(
                signedPayload: jws, verifier: chain.verifier, bundleId: Self.bundleId, environment: .production)
            Issue.record("a JWS signed with \(algorithm) was believed")
        } catch {
            #expect(error.code == .unverified)
        }
    }

    @Test func anotherAppOrEnvironmentIsRefusedInTheNotificationAndInItsTransaction() async throws {
        let chain = try AppleTestChain()
        #expect(Self.code(try await Self.read(chain, outerBundle: "com.other.game")) == .otherApplication)
        #expect(Self.code(try await Self.read(chain, outerEnvironment: "Sandbox")) == .otherEnvironment)
        let otherTransaction = Self.transaction(bundleId: "com.other.game")
        #expect(Self.code(try await Self.read(chain, transaction: otherTransaction)) == .otherApplication)
        let sandboxTransaction = Self.transaction(environment: "Sandbox")
        #expect(Self.code(try await Self.read(chain, transaction: sandboxTransaction)) == .otherEnvironment)
    }

    @Test(arguments: [
        "", "a.b", "a.b.c.d", "!!!.e30.AA", String(repeating: "A", count: 70_000),
        "eyJhbGciOiJFUzI1NiJ9.e30.AA",  // {"alg":"ES256"}: no x5c
    ])
    func aJWSThatCannotBeReadIsRefused(jws: String) async throws {
        let chain = try AppleTestChain()
        do {
            _ = try await AppleNotification.read(
                signedPayload: jws, verifier: chain.verifier, bundleId: Self.bundleId, environment: .production)
            Issue.record("\(jws.prefix(40)) was believed")
        } catch {
            #expect(error.code == .malformed || error.code == .unverified)
            #expect(!error.description.contains(jws) || jws.count < 12, "the JWS is not echoed")
        }
    }

    @Test func theBodyAStudioReceivesGivesItsSignedPayload() throws {
        #expect(try AppleNotification.signedPayload(ofBody: Array(#"{"signedPayload":"a.b.c"}"#.utf8)) == "a.b.c")
        for body in ["", "[]", "{}", #"{"signedPayload":1}"#, #"{"signedPayload":""}"#] {
            #expect(throws: StoreNotificationError.self) {
                try AppleNotification.signedPayload(ofBody: Array(body.utf8))
            }
        }
    }

    static func code(_ result: Result<StoreNotification, StoreNotificationError>) -> StoreNotificationError.Code? {
        if case .failure(let error) = result { return error.code }
        return nil
    }
}
