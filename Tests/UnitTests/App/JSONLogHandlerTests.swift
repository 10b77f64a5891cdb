import App
import Foundation
import Gamebase
import Logging
import Testing

@Suite("JSON log lines")
struct JSONLogHandlerTests {
    @Test func aLineIsOneJSONObjectWithEscapedValuesAndSortedMetadata() throws {
        var handler = JSONLogHandler(label: "iap-worker")
        handler[metadataKey: "z.last"] = "handler"
        let event = LogEvent(
            level: .info, message: "purchase \"granted\"\nnext",
            metadata: ["iap.payment_seq": "p\\1", "a.ctl": "\u{1}"],
            source: "Worker", file: #fileID, function: #function, line: #line)
        let line = handler.line(for: event)
        #expect(line.hasSuffix("}\n"))
        #expect(line.filter { $0 == "\n" }.count == 1, "one line")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String])
        #expect(object["msg"] == "purchase \"granted\"\nnext")
        #expect(object["iap.payment_seq"] == "p\\1")
        #expect(object["a.ctl"] == "\u{1}")
        #expect(object["z.last"] == "handler")
        #expect(object["level"] == "info")
        #expect(object["source"] == "Worker")
        let ts = try #require(object["ts"])
        #expect(ts.count == 24 && ts.hasSuffix("Z"), "UTC with milliseconds: \(ts)")
        #expect(
            try #require(ISO8601DateFormatter.withFractionalSeconds.date(from: ts)).timeIntervalSinceNow.magnitude < 60)
        let keys = line.split(separator: ",").compactMap { $0.split(separator: ":").first }.map(String.init)
        #expect(
            keys.firstIndex(of: #""a.ctl""#)! < keys.firstIndex(of: #""iap.payment_seq""#)!, "metadata sorted by key")
    }
}

extension ISO8601DateFormatter {
    static var withFractionalSeconds: ISO8601DateFormatter {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter
    }
}
