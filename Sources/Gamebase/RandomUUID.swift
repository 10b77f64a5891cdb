/// Random (version 4) UUIDs as lower-case strings, from the standard library's system generator (`getrandom`
/// on Linux). Foundation's `UUID()` opens and reads `/dev/urandom` on every call there: two file opens per
/// purchase for the transaction ids alone.
enum RandomUUID {
    static func string() -> String {
        var generator = SystemRandomNumberGenerator()
        let high = (generator.next() as UInt64) & ~0xF000 | 0x4000  // version 4: the high nibble of byte 6
        let low = (generator.next() as UInt64) & ~(0b11 << 62) | (0b10 << 62)  // variant 1: byte 8 starts 10
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
