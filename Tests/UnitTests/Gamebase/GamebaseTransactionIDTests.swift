import Foundation
import Gamebase
import Testing

@Suite struct GamebaseTransactionIDTests {
    @Test func freshIDsAreDistinctLowerCaseVersion4UUIDs() throws {
        let ids = (0..<2_000).map { _ in GamebaseTransactionID().value }
        #expect(Set(ids).count == ids.count)
        for id in ids {
            let uuid = try #require(UUID(uuidString: id), "\(id) is not a UUID")
            #expect(uuid.uuidString.lowercased() == id, "lower case, canonical form")
            let bytes = withUnsafeBytes(of: uuid.uuid) { Array($0) }
            #expect(bytes[6] >> 4 == 4, "version 4 in \(id)")
            #expect(bytes[8] >> 6 == 0b10, "RFC 4122 variant in \(id)")
        }
    }

    @Test func everyRandomBitVaries() {
        // 122 random bits: across many ids each one is seen both set and clear.
        var seenSet = [UInt8](repeating: 0, count: 16)
        var seenClear = [UInt8](repeating: 0, count: 16)
        for _ in 0..<500 {
            let uuid = UUID(uuidString: GamebaseTransactionID().value)!
            withUnsafeBytes(of: uuid.uuid) { bytes in
                for i in 0..<16 {
                    seenSet[i] |= bytes[i]
                    seenClear[i] |= ~bytes[i]
                }
            }
        }
        for i in 0..<16 {
            let fixed: UInt8 = i == 6 ? 0xF0 : i == 8 ? 0xC0 : 0
            #expect(seenSet[i] & seenClear[i] == ~fixed, "byte \(i)")
        }
    }

    /// The random bytes are read from the kernel in blocks and handed out once each: ids made on many threads at once,
    /// across many blocks, never repeat.
    @Test func idsMadeConcurrentlyAcrossManyBlocksNeverRepeat() async {
        let ids = await withTaskGroup(of: [String].self) { group in
            for _ in 0..<8 {
                group.addTask { (0..<3_000).map { _ in GamebaseTransactionID().value } }
            }
            return await group.reduce(into: [String]()) { $0 += $1 }
        }
        #expect(ids.count == 24_000)
        #expect(Set(ids).count == ids.count, "\(ids.count - Set(ids).count) repeated")
        // No random word is handed out twice, also not as the other half of another id: the halves, with the bits
        // the version (bits 12-15 of the first) and the variant (62-63 of the second) replace cleared in both, are
        // all distinct.
        let cleared = ~(UInt64(0xF000) | UInt64(0b11) << 62)
        let halves = ids.flatMap { id in
            let hex = id.filter { $0 != "-" }
            return [UInt64(hex.prefix(16), radix: 16)! & cleared, UInt64(hex.suffix(16), radix: 16)! & cleared]
        }
        #expect(Set(halves).count == halves.count, "\(halves.count - Set(halves).count) words repeated")
    }
}
