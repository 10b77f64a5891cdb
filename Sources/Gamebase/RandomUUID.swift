import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Random (version 4) UUIDs as lower-case strings, from the kernel's generator (`getrandom`). Foundation's `UUID()`
/// opens and reads `/dev/urandom` on every call on Linux, and the standard library's system generator makes one
/// `getrandom` call per 64-bit word, two per UUID: about three calls per message for the transaction ids alone.
/// ``RandomBytes`` takes them from the kernel 256 bytes at a time.
enum RandomUUID {
    static func string() -> String {
        let (first, second) = RandomBytes.shared.twoWords()
        let high = first & ~0xF000 | 0x4000  // version 4: the high nibble of byte 6
        let low = second & ~(0b11 << 62) | (0b10 << 62)  // variant 1: byte 8 starts 10
        let digits: StaticString = "0123456789abcdef"
        return String(unsafeUninitializedCapacity: 36) { buffer in
            var index = 0
            func append(_ word: UInt64, bytes: Range<Int>) {
                for byte in bytes {
                    let value = Int(truncatingIfNeeded: word >> (56 - 8 * UInt64(byte)))
                    buffer[index] = digits.utf8Start[(value >> 4) & 0xF]
                    buffer[index + 1] = digits.utf8Start[value & 0xF]
                    index += 2
                }
            }
            func dash() {
                buffer[index] = UInt8(ascii: "-")
                index += 1
            }
            append(high, bytes: 0..<4)
            dash()
            append(high, bytes: 4..<6)
            dash()
            append(high, bytes: 6..<8)
            dash()
            append(low, bytes: 0..<2)
            dash()
            append(low, bytes: 2..<8)
            return index
        }
    }
}

/// The kernel's random bytes (`getentropy`, the same source as `getrandom`), read 256 bytes at a time and handed out
/// once each: one system call per 16 UUIDs instead of two per UUID. A process that forks would hand its child the
/// same unread bytes; the worker never forks.
private final class RandomBytes: Sendable {
    static let shared = RandomBytes()

    private struct Buffer {
        var words: [UInt64]
        var next: Int
    }

    /// `getentropy`'s most per call: 256 bytes.
    static let wordCount = 32
    private let buffer = Mutex(
        Buffer(words: [UInt64](repeating: 0, count: RandomBytes.wordCount), next: RandomBytes.wordCount))

    /// Two words no caller has been given before.
    func twoWords() -> (UInt64, UInt64) {
        buffer.withLock { buffer in
            if buffer.next + 2 > buffer.words.count {
                Self.fill(&buffer.words)
                buffer.next = 0
            }
            defer { buffer.next += 2 }
            return (buffer.words[buffer.next], buffer.words[buffer.next + 1])
        }
    }

    /// Fills `words` from `getentropy`; where it fails (a kernel without `getrandom`), from the standard library's
    /// generator word by word.
    private static func fill(_ words: inout [UInt64]) {
        let filled = words.withUnsafeMutableBytes { raw in getentropy(raw.baseAddress!, raw.count) == 0 }
        guard !filled else { return }
        var generator = SystemRandomNumberGenerator()
        for index in words.indices { words[index] = generator.next() }
    }
}
