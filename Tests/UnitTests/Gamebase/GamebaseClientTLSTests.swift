import Gamebase
import GamebaseHTTP
import NIOSSL
import Testing

/// `https` base URLs: the client speaks TLS and verifies the server before anything is sent.
@Suite("Gamebase client over TLS", .timeLimit(.minutes(1)))
struct GamebaseClientTLSTests {
    typealias Support = GamebaseTestSupport

    /// A self-signed certificate for `localhost` and 127.0.0.1, valid until 2126: test material only.
    static let certificate = """
        -----BEGIN CERTIFICATE-----
        MIIBmTCCAT6gAwIBAgIUGGDE1xLibUyYRKduDwBpw89/nu4wCgYIKoZIzj0EAwIw
        FDESMBAGA1UEAwwJbG9jYWxob3N0MCAXDTI2MTEyMzExMDYxMFoYDzIxMjYxMDMw
        MTEwNjEwWjAUMRIwEAYDVQQDDAlsb2NhbGhvc3QwWTATBgcqhkjOPQIBBggqhkjO
        PQMBBwNCAAQv9JJ/62t1xIc7PTGTgktEoLM2Cg8IiTT5WkD47jY2skjawuQyE/z5
        JcqNtJQgqZrlUwoU4KWpPNdb6mxoqj4oo2wwajAdBgNVHQ4EFgQU+7BkdzuAdHzg
        sUbkv5yw6BNixu8wHwYDVR0jBBgwFoAU+7BkdzuAdHzgsUbkv5yw6BNixu8wGgYD
        VR0RBBMwEYIJbG9jYWxob3N0hwR/AAABMAwGA1UdEwEB/wQCMAAwCgYIKoZIzj0E
        AwIDSQAwRgIhAL473h8EOF9q3Gcbkx+00/Ar9nyNKMXId6QHnMHoyKDCAiEA4Mpb
        OZJAM50XUvqHqzJn0ywSDQQQUXfaB8grzkjfv+g=
        -----END CERTIFICATE-----
        """
    static let privateKey = """
        -----BEGIN PRIVATE KEY-----
        MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgHO5/rW/ZNDpXE7O9
        E0S7UYMBFv4qDnLB3K8Y9mmT7L2hRANCAAQv9JJ/62t1xIc7PTGTgktEoLM2Cg8I
        iTT5WkD47jY2skjawuQyE/z5JcqNtJQgqZrlUwoU4KWpPNdb6mxoqj4o
        -----END PRIVATE KEY-----
        """

    static let answer =
        #"{"header":{"transactionId":"t","isSuccessful":true,"resultCode":0,"resultMessage":"SUCCESS"},"result":{"paymentSeq":"2024051310001234","userId":"user-1","productType":"CONSUMABLE","isConsumable":true}}"#

    private func server() async throws -> FixedAnswerServer {
        let certificate = try NIOSSLCertificate(bytes: Array(Self.certificate.utf8), format: .pem)
        let key = try NIOSSLPrivateKey(bytes: Array(Self.privateKey.utf8), format: .pem)
        let context = try NIOSSLContext(
            configuration: .makeServerConfiguration(
                certificateChain: [.certificate(certificate)], privateKey: .privateKey(key)))
        return try await FixedAnswerServer(answer: FixedAnswerServer.ok(Self.answer), tls: context)
    }

    private func client(_ port: Int, trusting: Bool) throws -> GamebaseClient {
        var tls = TLSConfiguration.makeClientConfiguration()
        if trusting {
            tls.trustRoots = .certificates([try NIOSSLCertificate(bytes: Array(Self.certificate.utf8), format: .pem)])
        }
        return GamebaseClient(
            configuration: GamebaseConfiguration(
                baseURL: "https://localhost:\(port)", appID: Support.appID, secretKey: Secret(Support.secretKey),
                timeoutMilliseconds: 5_000),
            logger: Support.quietLogger, observer: nil, tls: tls)
    }

    @Test func anHTTPSBaseURLIsSpokenToOverTLS() async throws {
        let server = try await server()
        let port = server.port
        let client = try client(port, trusting: true)
        let first = try await client.paymentTransaction(accessToken: "tok", transactionID: .init())
        let second = try await client.paymentTransaction(accessToken: "tok", transactionID: .init())
        try await client.shutdown()
        await server.close()
        #expect(first.paymentSeq == "2024051310001234")
        #expect(second == first)
        #expect(server.requests.count == 2)
        #expect(server.requests.first?.headers.contains { $0.0 == "Host" && $0.1 == "localhost:\(port)" } == true)
    }

    @Test func aServerThatCannotBeVerifiedGetsNoRequestAndNoSecret() async throws {
        let server = try await server()
        // The system's trust roots do not include the test certificate.
        let client = try client(server.port, trusting: false)
        let error = await #expect(throws: GamebaseError.self) {
            try await client.paymentTransaction(accessToken: "tok", transactionID: .init())
        }
        try await client.shutdown()
        await server.close()
        #expect(error?.code == .connection)
        #expect(error?.isRetryable == true)
        #expect(server.requests.isEmpty)
    }
}
