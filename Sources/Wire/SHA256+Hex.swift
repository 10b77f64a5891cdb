import Crypto

extension SHA256 {
    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// The SHA-256 of `text`'s UTF-8 in lower-case hex: the ledger's token hashes and the consume-failed event ids.
    ///
    /// It runs for every purchase message: the string's own UTF-8 is hashed in place (no copy for native strings)
    /// and the 64 digits are written straight into the new string's storage.
    public static func hex(_ text: String) -> String {
        var text = text
        var hasher = SHA256()
        text.withUTF8 { hasher.update(bufferPointer: UnsafeRawBufferPointer($0)) }
        return hex(of: hasher.finalize())
    }

    /// The SHA-256 of `bytes` in lower-case hex.
    public static func hex(bytes: [UInt8]) -> String {
        hex(of: SHA256.hash(data: bytes))
    }

    private static func hex(of digest: SHA256.Digest) -> String {
        digest.withUnsafeBytes { bytes in
            String(unsafeUninitializedCapacity: bytes.count * 2) { digits in
                for (index, byte) in bytes.enumerated() {
                    digits[2 * index] = hexDigits[Int(byte >> 4)]
                    digits[2 * index + 1] = hexDigits[Int(byte & 0x0f)]
                }
                return bytes.count * 2
            }
        }
    }
}
