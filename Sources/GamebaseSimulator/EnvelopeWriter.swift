import Foundation
import Gamebase
import HTTPTypes
import Hummingbird
import NIOCore

/// Writes Gamebase's JSON envelope by hand: the simulator must keep up with a benchmark (≥ 20,000 answers/s).
struct EnvelopeWriter {
    let transactionID: String
    let uri: String
    var addUnknownFields = false
    /// Set by a helper that already produced the answer.
    var response: Response?

    static let jsonHeaders: HTTPFields = [.contentType: "application/json; charset=UTF-8"]

    func success(json result: [UInt8]) -> Response {
        var body = header(isSuccessful: true, code: 0, message: "SUCCESS")
        body += #","result":"#
        if addUnknownFields, result.first == UInt8(ascii: "{"), result.count > 2 {
            body += #"{"simulatorNote":"fields not in the contract may appear","#
            var bytes = Array(body.utf8)
            bytes.append(contentsOf: result.dropFirst())
            bytes.append(UInt8(ascii: "}"))
            return make(bytes)
        }
        var bytes = Array(body.utf8)
        bytes.append(contentsOf: result)
        bytes.append(UInt8(ascii: "}"))
        return make(bytes)
    }

    func failure(_ code: GamebaseResultCode, _ message: String) -> Response {
        var body = header(isSuccessful: false, code: code.rawValue, message: message, trace: true)
        body += "}"
        return make(Array(body.utf8))
    }

    static func plain(status: HTTPResponse.Status, text: String) -> Response {
        Response(
            status: status, headers: [.contentType: "text/html"], body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    private func header(isSuccessful: Bool, code: Int, message: String, trace: Bool = false) -> String {
        var text =
            #"{"header":{"transactionId":""# + transactionID
            + #"","isSuccessful":\#(isSuccessful),"resultCode":\#(code),"resultMessage":""# + message + "\""
        if trace {
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            text += #","traceError":{"trackingTime":\#(now),"throwPoint":"simulator","uri":"\#(Self.escaped(uri))"}"#
        }
        if addUnknownFields { text += #","serverTimeMs":0"# }
        return text + "}"
    }

    private func make(_ bytes: [UInt8]) -> Response {
        var headers = Self.jsonHeaders
        headers[SimulatorResponder.transactionHeader] = transactionID
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    /// Keeps a path safe inside a JSON string.
    static func escaped(_ text: String) -> String {
        String(text.unicodeScalars.filter { $0.value >= 0x20 && $0 != "\"" && $0 != "\\" }.map(Character.init))
    }
}
