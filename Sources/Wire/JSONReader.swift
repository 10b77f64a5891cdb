import Foundation

/// A strict JSON (RFC 8259) reader that pulls the values a caller asks for, in the order they come, and
/// skips (while still validating) everything else.
///
/// Gamebase answers are read with it instead of `JSONDecoder`, which cost about 40 µs of CPU per answer — a
/// third of a Get Payment Transaction call. What it accepts and how it reads values is what `JSONDecoder`
/// does for the same Swift types; a differential test holds it to that.
package struct JSONReader {
    package struct Failure: Error, CustomStringConvertible {
        package let offset: Int
        package let problem: String
        package var description: String { "invalid JSON at byte \(offset): \(problem)" }

        package init(offset: Int, problem: String) {
            self.offset = offset
            self.problem = problem
        }
    }

    private let bytes: ArraySlice<UInt8>
    private var index: Int
    private var depth = 0
    private let maxDepth: Int

    /// - Parameter maxDepth: objects and arrays nested deeper are refused.
    package init(_ bytes: ArraySlice<UInt8>, maxDepth: Int = 512) {
        self.bytes = bytes
        self.index = bytes.startIndex
        self.maxDepth = maxDepth
    }

    package init(_ bytes: [UInt8], maxDepth: Int = 512) {
        self.init(bytes[...], maxDepth: maxDepth)
    }

    // MARK: Structure

    /// Reads an object, calling `member` with each key; `member` must read or skip that key's value.
    package mutating func readObject(_ member: (inout JSONReader, String) throws(Failure) -> Void) throws(Failure) {
        try readContainer(UInt8(ascii: "{"), UInt8(ascii: "}"), "an object") { reader throws(Failure) in
            reader.skipWhitespace()
            guard reader.peek() == UInt8(ascii: "\"") else { throw reader.failure("a member name must be a string") }
            let key = try reader.readStringLiteral()
            reader.skipWhitespace()
            try reader.expect(UInt8(ascii: ":"), "':' after a member name")
            try member(&reader, key)
        }
    }

    /// Reads an array, calling `element` once per element; `element` must read or skip it.
    package mutating func readArray(_ element: (inout JSONReader) throws(Failure) -> Void) throws(Failure) {
        try readContainer(UInt8(ascii: "["), UInt8(ascii: "]"), "an array", element)
    }

    /// An object or array: `entry` reads each member or element; commas between them, none after the last.
    private mutating func readContainer(
        _ opening: UInt8, _ closing: UInt8, _ what: String, _ entry: (inout JSONReader) throws(Failure) -> Void
    ) throws(Failure) {
        try enter(opening, what)
        defer { depth -= 1 }
        skipWhitespace()
        if peek() == closing {
            index += 1
            return
        }
        while true {
            try entry(&self)
            skipWhitespace()
            switch next() {
            case UInt8(ascii: ","): continue
            case closing: return
            default: throw failure("',' or '\(Character(Unicode.Scalar(closing)))' expected in \(what)", at: index - 1)
            }
        }
    }

    /// Validates and skips one value of any kind.
    package mutating func skipValue() throws(Failure) {
        skipWhitespace()
        switch peek() {
        case UInt8(ascii: "{"): try readObject { reader, _ throws(Failure) in try reader.skipValue() }
        case UInt8(ascii: "["): try readArray { reader throws(Failure) in try reader.skipValue() }
        case UInt8(ascii: "\""): _ = try readStringLiteral()
        case UInt8(ascii: "t"), UInt8(ascii: "f"): _ = try readBool()
        case UInt8(ascii: "n"): try readLiteral("null")
        default: _ = try readNumberText()
        }
    }

    /// The bytes of the next value, validated and skipped; read them later with a reader of their own.
    package mutating func captureValue() throws(Failure) -> ArraySlice<UInt8> {
        skipWhitespace()
        let start = index
        try skipValue()
        return bytes[start..<index]
    }

    /// Fails unless only whitespace is left.
    package mutating func finish() throws(Failure) {
        skipWhitespace()
        guard index == bytes.endIndex else { throw failure("unexpected data after the value") }
    }

    // MARK: Values

    /// `true` when the next value is `null` (which it then consumes).
    package mutating func readNull() throws(Failure) -> Bool {
        skipWhitespace()
        guard peek() == UInt8(ascii: "n") else { return false }
        try readLiteral("null")
        return true
    }

    package mutating func readString() throws(Failure) -> String {
        skipWhitespace()
        guard peek() == UInt8(ascii: "\"") else { throw failure("a string expected") }
        return try readStringLiteral()
    }

    /// The next value when it is a string; any other value is validated, skipped, and `nil` returned.
    package mutating func readStringOrSkip() throws(Failure) -> String? {
        skipWhitespace()
        guard peek() == UInt8(ascii: "\"") else {
            try skipValue()
            return nil
        }
        return try readStringLiteral()
    }

    package mutating func readBool() throws(Failure) -> Bool {
        skipWhitespace()
        switch peek() {
        case UInt8(ascii: "t"):
            try readLiteral("true")
            return true
        case UInt8(ascii: "f"):
            try readLiteral("false")
            return false
        default:
            throw failure("true or false expected")
        }
    }

    /// An integer, as `JSONDecoder` reads one: plain digits, or a number whose value is a whole number in range.
    package mutating func readInt64() throws(Failure) -> Int64 {
        let start = index
        let text = try readNumberText()
        if let value = Int64(text) { return value }
        if let value = Double(text), value.rounded() == value, let exact = Int64(exactly: value) { return exact }
        throw failure("a number that is not a 64-bit integer", at: start)
    }

    package mutating func readInt() throws(Failure) -> Int {
        let start = index
        guard let value = Int(exactly: try readInt64()) else { throw failure("integer out of range", at: start) }
        return value
    }

    /// A number read from its text, without going through binary floating point.
    package mutating func readDecimal() throws(Failure) -> Decimal {
        let start = index
        let text = try readNumberText()
        // Foundation's Decimal holds 38 digits and exponents of ±127; beyond that it gives NaN (which would be written
        // into events as "NaN", not JSON) or loses the value. A price is nowhere near either.
        guard text.utf8.count <= 64, let value = DecimalText.decimal(text), !value.isNaN else {
            throw failure("a number that is not a decimal", at: start)
        }
        return value
    }

    package mutating func readOptionalString() throws(Failure) -> String? { try readNull() ? nil : try readString() }
    package mutating func readOptionalBool() throws(Failure) -> Bool? { try readNull() ? nil : try readBool() }
    package mutating func readOptionalInt64() throws(Failure) -> Int64? { try readNull() ? nil : try readInt64() }
    package mutating func readOptionalDecimal() throws(Failure) -> Decimal? { try readNull() ? nil : try readDecimal() }

    // MARK: Lexing

    private mutating func enter(_ opening: UInt8, _ what: String) throws(Failure) {
        skipWhitespace()
        guard peek() == opening else { throw failure("\(what) expected") }
        guard depth < maxDepth else { throw failure("nested deeper than \(maxDepth) levels") }
        depth += 1
        index += 1
    }

    private func peek() -> UInt8? {
        index < bytes.endIndex ? bytes[index] : nil
    }

    private mutating func next() -> UInt8? {
        guard index < bytes.endIndex else { return nil }
        defer { index += 1 }
        return bytes[index]
    }

    private mutating func expect(_ byte: UInt8, _ what: String) throws(Failure) {
        guard next() == byte else { throw failure("\(what) expected", at: index - 1) }
    }

    private mutating func skipWhitespace() {
        while index < bytes.endIndex {
            switch bytes[index] {
            case 0x20, 0x0A, 0x0D, 0x09: index += 1
            default: return
            }
        }
    }

    private mutating func readLiteral(_ literal: StaticString) throws(Failure) {
        let start = index
        let count = literal.utf8CodeUnitCount
        guard bytes.endIndex - index >= count else { throw failure("unexpected end of input", at: start) }
        for offset in 0..<count where bytes[index + offset] != literal.utf8Start[offset] {
            throw failure("invalid literal", at: start)
        }
        index += count
    }

    /// Validates a number against the JSON grammar and returns its text.
    private mutating func readNumberText() throws(Failure) -> String {
        skipWhitespace()
        let start = index
        if peek() == UInt8(ascii: "-") { index += 1 }
        switch peek() {
        case UInt8(ascii: "0"):
            index += 1
        case .some(UInt8(ascii: "1")...UInt8(ascii: "9")):
            skipDigits()
        default:
            throw failure(start == index ? "a value expected" : "a digit expected after '-'", at: start)
        }
        if peek() == UInt8(ascii: ".") {
            index += 1
            guard try skipAtLeastOneDigit() else { throw failure("a digit expected after '.'") }
        }
        if peek() == UInt8(ascii: "e") || peek() == UInt8(ascii: "E") {
            index += 1
            if peek() == UInt8(ascii: "+") || peek() == UInt8(ascii: "-") { index += 1 }
            guard try skipAtLeastOneDigit() else { throw failure("a digit expected in the exponent") }
        }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }

    private mutating func skipDigits() {
        while let byte = peek(), byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") { index += 1 }
    }

    private mutating func skipAtLeastOneDigit() throws(Failure) -> Bool {
        let start = index
        skipDigits()
        return index > start
    }

    /// Reads a string literal starting at its opening quote.
    private mutating func readStringLiteral() throws(Failure) -> String {
        let start = index
        index += 1
        let contentStart = index
        // The common case: no escapes, so the content is copied in one step.
        while index < bytes.endIndex {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                defer { index += 1 }
                return try validated(bytes[contentStart..<index], at: contentStart)
            }
            if byte == UInt8(ascii: "\\") { break }
            guard byte >= 0x20 else { throw failure("unescaped control character in a string") }
            index += 1
        }
        guard index < bytes.endIndex else { throw failure("unterminated string", at: start) }
        var scalars = Array(bytes[contentStart..<index])
        while index < bytes.endIndex {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                return try validated(scalars[...], at: contentStart)
            case UInt8(ascii: "\\"):
                index += 1
                try readEscape(into: &scalars)
            case ..<0x20:
                throw failure("unescaped control character in a string")
            default:
                scalars.append(byte)
                index += 1
            }
        }
        throw failure("unterminated string", at: start)
    }

    private mutating func readEscape(into output: inout [UInt8]) throws(Failure) {
        switch next() {
        case UInt8(ascii: "\""): output.append(UInt8(ascii: "\""))
        case UInt8(ascii: "\\"): output.append(UInt8(ascii: "\\"))
        case UInt8(ascii: "/"): output.append(UInt8(ascii: "/"))
        case UInt8(ascii: "b"): output.append(0x08)
        case UInt8(ascii: "f"): output.append(0x0C)
        case UInt8(ascii: "n"): output.append(0x0A)
        case UInt8(ascii: "r"): output.append(0x0D)
        case UInt8(ascii: "t"): output.append(0x09)
        case UInt8(ascii: "u"):
            var value = try readHex4()
            if (0xD800..<0xDC00).contains(value) {
                // A high surrogate must be followed by an escaped low surrogate.
                guard next() == UInt8(ascii: "\\"), next() == UInt8(ascii: "u") else {
                    throw failure("unpaired surrogate in a \\u escape", at: index - 1)
                }
                let low = try readHex4()
                guard (0xDC00..<0xE000).contains(low) else { throw failure("unpaired surrogate in a \\u escape") }
                value = 0x10000 + ((value - 0xD800) << 10) + (low - 0xDC00)
            } else if (0xDC00..<0xE000).contains(value) {
                throw failure("unpaired surrogate in a \\u escape")
            }
            // Surrogates are excluded above, so every value left is a scalar.
            UTF8.encode(Unicode.Scalar(value)!) { output.append($0) }
        default:
            throw failure("invalid escape in a string", at: index - 1)
        }
    }

    private mutating func readHex4() throws(Failure) -> UInt32 {
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard let byte = next() else { throw failure("unexpected end of input in a \\u escape") }
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw failure("invalid hex digit in a \\u escape", at: index - 1)
            }
            value = value << 4 | UInt32(digit)
        }
        return value
    }

    private func validated(_ content: ArraySlice<UInt8>, at offset: Int) throws(Failure) -> String {
        guard let string = UTF8Text.string(validating: content) else {
            throw failure("invalid UTF-8 in a string", at: offset)
        }
        return string
    }

    private func failure(_ problem: String, at offset: Int? = nil) -> Failure {
        Failure(offset: offset ?? index, problem: problem)
    }
}
