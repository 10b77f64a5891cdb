/// Text from bytes that must be valid UTF-8, without the standard library's generic validation.
///
/// `String(validating:as:)` goes through a path generic over the encoding, which looks up type metadata at run
/// time for every call (3.5 % of the worker's samples in a profile, and five allocations per purchase, when every
/// JSON key and value of a Gamebase answer went through it). ASCII (nearly every byte the worker reads) is decoded
/// on the standard library's fast path for contiguous bytes; anything else is decoded with repair and kept only
/// when the repair changed nothing, which is exactly when the bytes were valid UTF-8.
package enum UTF8Text {
    /// The text of `bytes`, or `nil` when they are not valid UTF-8 (what `String(validating:as: UTF8.self)` returns).
    package static func string(validating bytes: ArraySlice<UInt8>) -> String? {
        bytes.withUnsafeBufferPointer { string(validating: $0) }
    }

    /// `true` when `bytes` are valid UTF-8; ASCII is answered without building a string.
    package static func isValid(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBufferPointer { isASCII($0) || repairedUnchanged($0) != nil }
    }

    private static func string(validating buffer: UnsafeBufferPointer<UInt8>) -> String? {
        isASCII(buffer) ? String(decoding: buffer, as: UTF8.self) : repairedUnchanged(buffer)
    }

    private static func isASCII(_ buffer: UnsafeBufferPointer<UInt8>) -> Bool {
        var bits: UInt8 = 0
        for byte in buffer { bits |= byte }
        return bits < 0x80
    }

    /// Repair replaces each invalid sequence with U+FFFD, so valid input is the only input it returns unchanged.
    private static func repairedUnchanged(_ buffer: UnsafeBufferPointer<UInt8>) -> String? {
        let decoded = String(decoding: buffer, as: UTF8.self)
        return decoded.utf8.elementsEqual(buffer) ? decoded : nil
    }
}
