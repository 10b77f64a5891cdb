import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// RFC 3339 timestamps in UTC with milliseconds (`2026-11-22T10:20:30.123Z`), written by hand: the worker
/// stamps every event and log line, and a date format style costs more than the rest of building them.
public enum RFC3339 {
    /// Reads an RFC 3339 time with or without fractional seconds (`2026-11-22T10:20:30.123Z`, `…+09:00`): exactly
    /// `YYYY-MM-DD`, `T`, `hh:mm:ss`, optional `.` and digits, then `Z` or `±hh:mm` (RFC 3339's `t` and `z` too), and
    /// nothing after it. `nil` for anything else, a day the month does not have included.
    ///
    /// Read by hand: Foundation's `ISO8601DateFormatter` goes through ICU, whose calendar and locale tables then stay
    /// resident in the worker (6 MiB) for the dead letter that first read a time.
    public static func date(_ text: String) -> Date? {
        var text = text
        return text.withUTF8 { bytes in
            var reader = Reader(bytes: bytes)
            return reader.date()
        }
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

extension RFC3339 {
    /// A cursor over the bytes of one time.
    private struct Reader {
        let bytes: UnsafeBufferPointer<UInt8>
        var at = 0

        mutating func date() -> Date? {
            guard let year = number(4), byte(UInt8(ascii: "-")), let month = number(2), byte(UInt8(ascii: "-")),
                let day = number(2), byte(UInt8(ascii: "T")) || byte(UInt8(ascii: "t")),
                let hour = number(2), byte(UInt8(ascii: ":")), let minute = number(2), byte(UInt8(ascii: ":")),
                let second = number(2)
            else { return nil }
            guard (1...12).contains(month), (1...RFC3339.days(inMonth: month, of: year)).contains(day),
                hour <= 23, minute <= 59, second <= 60  // 60: a leap second, read as the next minute's first
            else { return nil }
            var nanoseconds = 0
            if byte(UInt8(ascii: ".")) {
                var digits = 0
                while at < bytes.count, let digit = Self.digit(bytes[at]) {
                    // Beyond nanoseconds a Date cannot tell the difference; the digits are read and left.
                    if digits < 9 { nanoseconds = nanoseconds * 10 + digit }
                    digits += 1
                    at += 1
                }
                guard digits > 0 else { return nil }
                for _ in digits..<max(digits, 9) { nanoseconds *= 10 }
            }
            var offsetSeconds = 0
            if byte(UInt8(ascii: "Z")) || byte(UInt8(ascii: "z")) {
                offsetSeconds = 0
            } else {
                let sign: Int
                if byte(UInt8(ascii: "+")) {
                    sign = 1
                } else if byte(UInt8(ascii: "-")) {
                    sign = -1
                } else {
                    return nil
                }
                guard let offsetHours = number(2), byte(UInt8(ascii: ":")), let offsetMinutes = number(2),
                    offsetHours <= 23, offsetMinutes <= 59
                else { return nil }
                offsetSeconds = sign * (offsetHours * 3_600 + offsetMinutes * 60)
            }
            guard at == bytes.count else { return nil }
            let days = RFC3339.daysSinceEpoch(year: year, month: month, day: day)
            let seconds = days * 86_400 + hour * 3_600 + minute * 60 + second - offsetSeconds
            return Date(timeIntervalSince1970: Double(seconds) + Double(nanoseconds) / 1_000_000_000)
        }

        /// Exactly `count` ASCII digits.
        private mutating func number(_ count: Int) -> Int? {
            guard bytes.count - at >= count else { return nil }
            var value = 0
            for _ in 0..<count {
                guard let digit = Self.digit(bytes[at]) else { return nil }
                value = value * 10 + digit
                at += 1
            }
            return value
        }

        private mutating func byte(_ expected: UInt8) -> Bool {
            guard at < bytes.count, bytes[at] == expected else { return false }
            at += 1
            return true
        }

        private static func digit(_ byte: UInt8) -> Int? {
            (0x30...0x39).contains(byte) ? Int(byte &- 0x30) : nil
        }
    }

    static func days(inMonth month: Int, of year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days from 1970-01-01 to a date of the proleptic Gregorian calendar (years 0 to 9999 here), counting in
    /// 400-year eras from March 1st so that a leap day ends its year.
    static func daysSinceEpoch(year: Int, month: Int, day: Int) -> Int {
        let year = month <= 2 ? year - 1 : year
        let era = (year >= 0 ? year : year - 399) / 400
        let yearOfEra = year - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}

extension Int64 {
    /// Division rounding towards negative infinity (for dates before 1970).
    fileprivate func quotientFloor(_ divisor: Int64) -> Int64 {
        let (quotient, remainder) = quotientAndRemainder(dividingBy: divisor)
        return remainder < 0 ? quotient - 1 : quotient
    }
}
