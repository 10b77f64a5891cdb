import AppStoreSimulator
import Crypto
import Foundation
import Fulfilment
import SwiftASN1
import Testing
import X509

@testable import Stores

/// An App Store notification is believed only when its JWS and its transaction's JWS verify to a trusted root, with
/// Apple's markers, signed within the history's reach of their receipt, for the configured app and environment;
/// everything else is refused saying why.
@Suite("App Store notifications")
struct AppleNotificationTests {
    static let bundleId = "com.studio.game"
    static let signedMillis = Int64(AppleTestChain.signedAt.timeIntervalSince1970 * 1_000)

    static func transaction(
        bundleId: String = bundleId, environment: String = "Production", revoked: Bool = true,
        signedMillis: Int64 = signedMillis
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
        signedTransaction: String?, signedMillis: Int64 = signedMillis, data: String? = nil
    ) -> String {
        let transactionMember = signedTransaction.map { #","signedTransactionInfo":"\#($0)""# } ?? ""
        let dataMember =
            data ?? #""data":{"bundleId":"\#(bundleId)","environment":"\#(environment)"\#(transactionMember)}"#
        return """
            {"notificationType":"\(type)","notificationUUID":"9b4a1e7e-1111-4d5c-9c3a-000000000001",
             "version":"2.0","signedDate":\(signedMillis),\(dataMember)}
            """
    }

    static func read(
        _ jws: String, verifier: AppleJWSVerifier, receivedAt: Date = AppleTestChain.receivedAt
    ) async -> Result<StoreNotification, StoreNotificationError> {
        do {
            return .success(
                try await AppleNotification.read(
                    signedPayload: jws, verifier: verifier, bundleId: bundleId, environment: .production,
                    receivedAt: receivedAt))
        } catch {
            return .failure(error)
        }
    }

    /// A REFUND (or `type`) whose transaction is signed by `transactionChain` (the same chain unless given).
    static func read(
        _ chain: AppleTestChain, type: String = "REFUND", transaction: String = transaction(),
        outerBundle: String = bundleId, outerEnvironment: String = "Production", verifier: AppleJWSVerifier? = nil,
        transactionChain: AppleTestChain? = nil
    ) async throws -> Result<StoreNotification, StoreNotificationError> {
        let signedTransaction = try (transactionChain ?? chain).sign(transaction)
        let payload = try chain.sign(
            notification(
                type: type, bundleId: outerBundle, environment: outerEnvironment, signedTransaction: signedTransaction))
        return await read(payload, verifier: verifier ?? chain.verifier)
    }

    static func code(_ result: Result<StoreNotification, StoreNotificationError>) -> StoreNotificationError.Code? {
        if case .failure(let error) = result { return error.code }
        return nil
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
        let read = try await Self.read(try AppleTestChain()).get()
        #expect(read.store == .apple)
        #expect(read.kind == .refund)
        #expect(read.authenticity == .signedByStore)
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
        let read = try await Self.read(
            try AppleTestChain(), type: type, transaction: Self.transaction(revoked: false)
        ).get()
        #expect(read.kind == kind)
        #expect(read.storeType == type)
        #expect(read.occurredAt == AppleTestChain.signedAt)
    }

    @Test func aNotificationWithoutATransactionOrDataIsOtherUnlessItsTypeNeedsOne() async throws {
        let chain = try AppleTestChain()
        let test = try chain.sign(AppleNotificationTests.notification(type: "TEST", signedTransaction: nil))
        #expect(try await Self.read(test, verifier: chain.verifier).get().kind == .other)
        let summary = #""summary":{"bundleId":"com.studio.game","environment":"Production","succeededCount":3}"#
        let renewal = try chain.sign(
            Self.notification(type: "RENEWAL_EXTENSION", signedTransaction: nil, data: summary))
        #expect(try await Self.read(renewal, verifier: chain.verifier).get().kind == .other)
        let otherApp = summary.replacingOccurrences(of: "com.studio.game", with: "com.other.game")
        let foreign = try chain.sign(
            Self.notification(type: "RENEWAL_EXTENSION", signedTransaction: nil, data: otherApp))
        #expect(Self.code(await Self.read(foreign, verifier: chain.verifier)) == .otherApplication)
        for data in [nil, #""summary":{}"#] {
            let refund = try chain.sign(Self.notification(type: "REFUND", signedTransaction: nil, data: data))
            #expect(Self.code(await Self.read(refund, verifier: chain.verifier)) == .malformed)
        }
    }

    @Test func aChainToAnotherRootIsRefused() async throws {
        let chain = try AppleTestChain()
        let stranger = try AppleTestChain(name: "Stranger")
        #expect(Self.code(try await Self.read(chain, verifier: stranger.verifier)) == .unverified)
        // Nor does Apple's own root accept a chain of ours.
        #expect(Self.code(try await Self.read(chain, verifier: try AppleJWSVerifier())) == .unverified)
    }

    @Test func aTransactionSignedByAnotherChainOrKeyIsRefused() async throws {
        let chain = try AppleTestChain()
        let stranger = try AppleTestChain(name: "Stranger")
        #expect(Self.code(try await Self.read(chain, transactionChain: stranger)) == .unverified)
        let forged = try chain.sign(Self.transaction(), key: P256.Signing.PrivateKey())
        let payload = try chain.sign(Self.notification(signedTransaction: forged))
        #expect(Self.code(await Self.read(payload, verifier: chain.verifier)) == .unverified)
    }

    @Test func aChainWithoutApplesMarkersOrOfAnotherShapeIsRefused() async throws {
        #expect(Self.code(try await Self.read(try AppleTestChain(leafMarked: false))) == .unverified)
        #expect(Self.code(try await Self.read(try AppleTestChain(intermediateMarked: false))) == .unverified)
        let chain = try AppleTestChain()
        let payload = Self.notification(signedTransaction: try chain.sign(Self.transaction()))
        // Signed by the intermediate, presenting itself as the leaf; the root as the only certificate; five certificates.
        let byIntermediate = try chain.sign(
            payload, key: chain.intermediateKey, chain: [chain.intermediate, chain.root])
        let rootOnly = try chain.sign(payload, key: chain.rootKey, chain: [chain.root])
        let five = try chain.sign(
            payload, chain: [chain.leaf, chain.intermediate, chain.intermediate, chain.intermediate, chain.root])
        #expect(Self.code(await Self.read(byIntermediate, verifier: chain.verifier)) == .unverified)
        #expect(Self.code(await Self.read(rootOnly, verifier: chain.verifier)) == .unverified)
        #expect(Self.code(await Self.read(five, verifier: chain.verifier)) == .malformed)
    }

    @Test func aLeafNotValidWhenThePayloadWasSignedIsRefused() async throws {
        let signedAt = AppleTestChain.signedAt
        let expired = try AppleTestChain(
            validFrom: signedAt.addingTimeInterval(-86_400 * 60), validUntil: signedAt.addingTimeInterval(-86_400))
        #expect(Self.code(try await Self.read(expired)) == .unverified)
        // Valid then, expired at the receipt: still evidence.
        let then = try AppleTestChain(
            validFrom: signedAt.addingTimeInterval(-86_400), validUntil: signedAt.addingTimeInterval(3_600))
        #expect(Self.code(try await Self.read(then)) == nil)
    }

    @Test func aSigningTimeOutsideTheHistorysReachOfItsReceiptIsRefused() async throws {
        let chain = try AppleTestChain()
        let payload = try chain.sign(Self.notification(signedTransaction: try chain.sign(Self.transaction())))
        let signedAt = AppleTestChain.signedAt
        // 186 days later (a leaked key of an expired leaf backdating its evidence), or an hour before it was signed.
        for received in [signedAt.addingTimeInterval(186 * 86_400), signedAt.addingTimeInterval(-3_600)] {
            #expect(Self.code(await Self.read(payload, verifier: chain.verifier, receivedAt: received)) == .unverified)
        }
        #expect(Self.code(await Self.read(payload, verifier: chain.verifier, receivedAt: signedAt)) == nil)
        for millis: Int64 in [0, -1] {
            let undated = try chain.sign(Self.notification(signedTransaction: nil, signedMillis: millis))
            #expect(Self.code(await Self.read(undated, verifier: chain.verifier)) == .malformed)
        }
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
            #expect(Self.code(await Self.read(jws, verifier: chain.verifier)) == .unverified)
        }
    }

    @Test(arguments: ["none", "HS256", "RS256", "ES384"])
    func anAlgorithmOtherThanES256IsRefused(algorithm: String) async throws {
        let chain = try AppleTestChain()
        let jws = try chain.sign(Self.notification(signedTransaction: nil), algorithm: algorithm)
        #expect(Self.code(await Self.read(jws, verifier: chain.verifier)) == .unverified)
    }

    @Test func aHeaderNamingAMemberTwiceIsRefusedAndAnAlgorithmIsNeverEchoedWhole() async throws {
        let chain = try AppleTestChain()
        let payload = Self.notification(signedTransaction: nil)
        let twice = try chain.sign(payload, header: #"{"alg":"none","alg":"ES256","x5c":[]}"#)
        #expect(Self.code(await Self.read(twice, verifier: chain.verifier)) == .malformed)
        let long = String(repeating: "x", count: 5_000) + "\\n\\u001b[31m"
        let hostile = try chain.sign(payload, algorithm: long)
        guard case .failure(let error) = await Self.read(hostile, verifier: chain.verifier) else {
            Issue.record("a JWS with a hostile alg was believed")
            return
        }
        #expect(error.code == .unverified)
        #expect(error.description.count < 300)
        #expect(!error.description.contains("\n") && !error.description.contains("\u{1b}"))
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

    @Test func aNotificationNamingAMemberTwiceIsRefused() async throws {
        let chain = try AppleTestChain()
        let twice = Self.notification(signedTransaction: nil).replacingOccurrences(
            of: #""version":"2.0","#, with: #""notificationType":"TEST","version":"2.0","#)
        #expect(Self.code(await Self.read(try chain.sign(twice), verifier: chain.verifier)) == .malformed)
    }

    @Test(arguments: [
        "", "a.b", "a.b.c.d", "!!!.e30.AA", String(repeating: "A", count: 70_000),
        "eyJhbGciOiJFUzI1NiJ9.e30.AA",  // {"alg":"ES256"}: no x5c
        "eyJhbGciOiJFUzI1NiJ9.e30.A",  // a base64url part of impossible length
    ])
    func aJWSThatCannotBeReadIsRefused(jws: String) async throws {
        let chain = try AppleTestChain()
        guard case .failure(let error) = await Self.read(jws, verifier: chain.verifier) else {
            Issue.record("\(jws.prefix(40)) was believed")
            return
        }
        #expect(error.code == .malformed || error.code == .unverified)
        #expect(error.description.count < 300, "the JWS is not echoed")
    }

    @Test func theBodyAStudioReceivesGivesItsSignedPayload() throws {
        #expect(try AppleNotification.signedPayload(ofBody: Array(#"{"signedPayload":"a.b.c"}"#.utf8)) == "a.b.c")
        for body in ["", "[]", "{}", #"{"signedPayload":1}"#, #"{"signedPayload":""}"#] {
            #expect(throws: StoreNotificationError.self) {
                try AppleNotification.signedPayload(ofBody: Array(body.utf8))
            }
        }
    }
}
