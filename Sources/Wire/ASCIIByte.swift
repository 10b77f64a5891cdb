extension UInt8 {
    /// `a-z`, `A-Z`, `0-9`: what request paths and header values built from tokens and ids may hold as they are.
    package var isASCIIAlphanumeric: Bool {
        switch self {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        default:
            false
        }
    }
}
