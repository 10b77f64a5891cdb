import Crypto
import Testing

@testable import Fulfilment

/// Kept only while the hand-written SHA-256 and swift-crypto's both exist: they agree on random inputs of every
/// length up to a few blocks and on long ones.
@Suite struct SHA256AgreementTests {
    @Test func handWrittenAndSwiftCryptoAgreeOnThousandsOfRandomInputs() {
        var generator = SystemRandomNumberGenerator()
        for index in 0..<3_300 {
            // Every length up to a few blocks, then random ones, and a few near the 8 KiB token limit.
            let length =
                index < 300 ? index : index < 3_280 ? Int.random(in: 0...1_100, using: &generator) : Int.random(in: 8_000...9_000, using: &generator)
            // Even inputs: ASCII; odd ones: any Unicode scalars, so the UTF-8 of the string is hashed too.
            let text =
                index.isMultiple(of: 2)
                ? String(decoding: (0..<length).map { _ in UInt8.random(in: 0...127, using: &generator) }, as: UTF8.self)
                : String(String.UnicodeScalarView((0..<length / 3).compactMap { _ in
                    Unicode.Scalar(UInt32.random(in: 1...0x10_FFFF, using: &generator))
                }))
            let expected = Crypto.SHA256.hash(data: Array(text.utf8)).map { byte in
                let hex = String(byte, radix: 16)
                return byte < 16 ? "0" + hex : hex
            }.joined()
            #expect(Fulfilment.SHA256.hex(text) == expected, "length \(length)")
        }
    }
}
