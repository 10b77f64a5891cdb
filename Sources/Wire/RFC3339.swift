import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// RFC 3339 timestamps in UTC with milliseconds (`2026-11-22T10:20:30.123Z`), written by hand: the worker
/// stamps every event and log line, and a date format style costs more than the rest of building them.
public enum RFC3339 {
    /// Reads an RFC 3339 time with or without fractional seconds (`2026-11-22T10:20:30.123Z`, `…+09:00`).
    public static func date(_ text: String) -> Date? {
        let fractional = ISO8601DateFormatter()
        fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = fractional.date(from: text) { return date }
        let whole = ISO8601DateFormatter()
        whole.formatOptions = [.withInternetDateTime]
        return whole.date(from: text)
    }

    public static func string(_ date: Date) -> String {
        let milliseconds = (date.timeIntervalSince1970 * 1000).rounded(.down)
        return string(epochMilliseconds: Int64(exactly: milliseconds) ?? (milliseconds > 0 ? .max : .min))
    }

    /// Years outside 0001…9999 are written as the nearest of the two, so the text is always RFC 3339.
    public static func string(epochMilliseconds: Int64) -> String {
        let epochMilliseconds = min(max(epochMilliseconds, minimumMilliseconds), maximumMilliseconds)
        var seconds = time_t(epochMilliseconds.quotientFloor(1000))
        let millis = Int32(epochMilliseconds - Int64(seconds) * 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        // 24 ASCII bytes written in place: no intermediate strings (every log line and event is stamped).
        return String(unsafeUninitializedCapacity: 24) { buffer in
            var at = 0
            func put(_ value: Int32, _ width: Int) {
                var value = Int(value)
                for index in stride(from: at + width - 1, through: at, by: -1) {
                    buffer[index] = UInt8(truncatingIfNeeded: 0x30 + value % 10)
                    value /= 10
                }
                at += width
            }
            func put(_ byte: UInt8) {
                buffer[at] = byte
                at += 1
            }
            put(parts.tm_year + 1900, 4)
            put(UInt8(ascii: "-"))
            put(parts.tm_mon + 1, 2)
            put(UInt8(ascii: "-"))
            put(parts.tm_mday, 2)
            put(UInt8(ascii: "T"))
            put(parts.tm_hour, 2)
            put(UInt8(ascii: ":"))
            put(parts.tm_min, 2)
            put(UInt8(ascii: ":"))
            put(parts.tm_sec, 2)
            put(UInt8(ascii: "."))
            put(millis, 3)
            put(UInt8(ascii: "Z"))
            return at
        }
    }
}

extension RFC3339 {
    /// 0001-01-01T00:00:00.000Z and 9999-12-31T23:59:59.999Z.
    static let minimumMilliseconds: Int64 = -62_135_596_800_000
    package static let maximumMilliseconds: Int64 = 253_402_300_799_999
}

extension Int64 {
    /// Division rounding towards negative infinity (for dates before 1970).
    fileprivate func quotientFloor(_ divisor: Int64) -> Int64 {
        let (quotient, remainder) = quotientAndRemainder(dividingBy: divisor)
        return remainder < 0 ? quotient - 1 : quotient
    }
}
