/// The response envelope every Gamebase API answers with (contract §3.3).
struct GamebaseEnvelope<Result: Decodable>: Decodable {
    struct Header: Decodable {
        var transactionId: String?
        var isSuccessful: Bool
        var resultCode: Int
        var resultMessage: String?
    }

    var header: Header
    var result: Result?
}

/// An envelope whose `result` is not read (Consume failures, or when only the header matters).
struct Ignored: Decodable {
    init(from decoder: any Decoder) throws {}
}
