/// Reads a fuzzer's input as a stream of simple, self-describing pieces (docs/fuzzing.md, "Input framing").
///
/// Every read succeeds: past the end it yields zeros and empty fields, so any byte string is a valid input and a
/// mutation that breaks a length only shortens a field.
public struct FuzzBytes {
    private let bytes: [UInt8]
    private var index = 0

    public init(_ bytes: [UInt8]) {
        self.bytes = bytes
    }

    public init(_ start: UnsafeRawPointer, _ count: Int) {
        self.init(Array(UnsafeRawBufferPointer(start: start, count: count)))
    }

    public var isAtEnd: Bool { index >= bytes.count }

    /// One byte; 0 past the end.
    public mutating func byte() -> UInt8 {
        guard index < bytes.count else { return 0 }
        defer { index += 1 }
        return bytes[index]
    }

    /// A little-endian `Int64` from the next 8 bytes (missing bytes are zeros).
    public mutating func int64() -> Int64 {
        var value: UInt64 = 0
        for shift in stride(from: 0, to: 64, by: 8) { value |= UInt64(byte()) << UInt64(shift) }
        return Int64(bitPattern: value)
    }

    /// A field: a little-endian `UInt16` length, then that many bytes (fewer when the input ends first).
    public mutating func field() -> [UInt8] {
        let length = Int(byte()) | Int(byte()) << 8
        let end = min(bytes.count, index + length)
        guard index < end else { return [] }
        defer { index = end }
        return Array(bytes[index..<end])
    }

    /// A field as text: invalid UTF-8 is replaced, as a Kafka client reading header names does.
    public mutating func text() -> String {
        String(decoding: field(), as: UTF8.self)
    }

    /// What is left, consumed.
    public mutating func rest() -> [UInt8] {
        guard index < bytes.count else { return [] }
        defer { index = bytes.count }
        return Array(bytes[index...])
    }
}
