import Testing
import Wire

/// Text read from bytes must be what the standard library's validating initializer reads: the same string for
/// valid UTF-8, `nil` for anything else, whatever the bytes.
@Suite("UTF-8 text from bytes")
struct UTF8TextTests {
    private func standard(_ bytes: [UInt8]) -> String? {
        String(validating: bytes, as: UTF8.self)
    }

    @Test func validTextReadsAsTheStandardLibraryReadsIt() {
        let texts = [
            "", "paymentSeq", "2024-01-01T00:00:00Z", "가격", "€ 4,99", "🎮💎", "\u{FFFD}", "a\u{0}b", "\u{10FFFF}",
        ]
        for text in texts {
            let bytes = Array(text.utf8)
            // Compared byte for byte: String's == would also accept a canonically equivalent text.
            #expect(UTF8Text.string(validating: bytes[...]).map { Array($0.utf8) } == bytes)
            #expect(UTF8Text.isValid(bytes))
        }
    }

    @Test func invalidSequencesAreRefused() {
        let invalid: [[UInt8]] = [
            [0x80],  // a lone continuation byte
            [0xC3],  // a lead byte without its continuation
            [0x61, 0xE2, 0x82],  // truncated three-byte sequence after ASCII
            [0xC0, 0xAF],  // overlong '/'
            [0xE0, 0x80, 0xAF],  // overlong, three bytes
            [0xED, 0xA0, 0x80],  // an encoded surrogate
            [0xF4, 0x90, 0x80, 0x80],  // above U+10FFFF
            [0xFF], [0xFE, 0xFF],
            [0xEF, 0xBF, 0x3D],  // the replacement character's bytes with the last one changed
            [0xF0, 0x90, 0x80],  // truncated four-byte sequence: repaired to exactly U+FFFD's three bytes
            [0xEF, 0xBF, 0xBD, 0x80],  // a real U+FFFD, then a lone continuation byte
        ]
        for bytes in invalid {
            #expect(UTF8Text.string(validating: bytes[...]) == nil, "\(bytes)")
            #expect(!UTF8Text.isValid(bytes), "\(bytes)")
            #expect(standard(bytes) == nil)
        }
    }

    @Test func anySliceOfRandomBytesAgreesWithTheStandardLibrary() {
        var generator = SystemRandomNumberGenerator()
        // Bytes drawn mostly from the ranges where UTF-8's rules are decided.
        let alphabet: [UInt8] = [
            0x00, 0x41, 0x7F, 0x80, 0x8F, 0x9F, 0xA0, 0xBF, 0xC0, 0xC2, 0xDF, 0xE0, 0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xFF,
        ]
        for _ in 0..<20_000 {
            let count = Int.random(in: 0...8, using: &generator)
            let bytes = (0..<count).map { _ in
                Bool.random(using: &generator)
                    ? alphabet.randomElement(using: &generator)! : UInt8.random(in: 0...255, using: &generator)
            }
            let start = Int.random(in: 0...count, using: &generator)
            let slice = bytes[start...]
            #expect(
                UTF8Text.string(validating: slice).map { Array($0.utf8) }
                    == String(validating: slice, as: UTF8.self).map { Array($0.utf8) }, "\(bytes) from \(start)")
            #expect(UTF8Text.isValid(bytes) == (standard(bytes) != nil), "\(bytes)")
        }
    }
}
