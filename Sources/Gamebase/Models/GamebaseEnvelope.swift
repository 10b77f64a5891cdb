import Wire

/// The response envelope every Gamebase API answers with (contract §3.3).
package struct GamebaseEnvelope<Result> {
    package struct Header {
        package var transactionId: String?
        package var isSuccessful: Bool
        package var resultCode: Int
        package var resultMessage: String?
    }

    package var header: Header
    package var result: Result?

    /// Reads an envelope; `result` reads its `result` member, and only when the header says the call succeeded
    /// (a failed call's `result` is not looked at beyond being valid JSON).
    package static func read(
        _ bytes: [UInt8], result readResult: (inout JSONReader) throws(JSONReader.Failure) -> Result
    ) throws(JSONReader.Failure) -> Self {
        var reader = JSONReader(bytes)
        var header: Header?
        var resultBytes: ArraySlice<UInt8>?
        try reader.readObject { reader, key throws(JSONReader.Failure) in
            switch key {
            case "header": header = try reader.readNull() ? nil : try Header.read(&reader)
            case "result": resultBytes = try reader.captureValue()
            default: try reader.skipValue()
            }
        }
        try reader.finish()
        guard let header else { throw JSONReader.Failure(offset: 0, problem: "no header") }
        var envelope = GamebaseEnvelope(header: header, result: nil)
        if header.isSuccessful, let resultBytes {
            var resultReader = JSONReader(resultBytes)
            if try !resultReader.readNull() { envelope.result = try readResult(&resultReader) }
        }
        return envelope
    }
}

extension GamebaseEnvelope.Header {
    package static func read(_ reader: inout JSONReader) throws(JSONReader.Failure) -> Self {
        var transactionId: String?
        var isSuccessful: Bool?
        var resultCode: Int?
        var resultMessage: String?
        try reader.readObject { reader, key throws(JSONReader.Failure) in
            switch key {
            case "transactionId": transactionId = try reader.readOptionalString()
            case "isSuccessful": isSuccessful = try reader.readOptionalBool()
            case "resultCode": resultCode = try reader.readNull() ? nil : try reader.readInt()
            case "resultMessage": resultMessage = try reader.readOptionalString()
            default: try reader.skipValue()
            }
        }
        guard let isSuccessful, let resultCode else {
            throw JSONReader.Failure(offset: 0, problem: "the header lacks isSuccessful or resultCode")
        }
        return Self(
            transactionId: transactionId, isSuccessful: isSuccessful, resultCode: resultCode,
            resultMessage: resultMessage)
    }
}
