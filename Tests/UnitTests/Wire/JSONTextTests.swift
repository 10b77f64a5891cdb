import Foundation
import Testing
import Wire

@Suite("Hand-written JSON")
struct JSONTextTests {
    /// Members in sorted order, so `JSONEncoder` with `.sortedKeys` writes them in the order the test does.
    struct Sample: Encodable {
        var absent: String?
        var count: Int64?
        var flag: Bool
        var price: Decimal?
        var text: String
    }

    /// Every ASCII character, and beyond ASCII: two-byte, three-byte, four-byte and combining sequences.
    static let strings: [String] =
        (0..<0x80).map { String(UnicodeScalar(UInt8($0))) } + [
            "", "plain", "é", "漢字", "🎮", "e\u{301}", "\"\u{301}", "a\u{0}b", "\u{2028}\u{2029}", "\\\"/\\\\",
            // Escapes between multi-byte text, first and last, and a long run of both (no NUL in the last: the test
            // log prints arguments raw, and scripts/test-lanes.py would lose the line that follows a NUL).
            "é\"漢\u{1f}🎮\\x\u{301}\n", "\tstart", "end\u{7f}\r", String(repeating: "ü\"\u{1f}✓", count: 2_048),
        ]

    @Test(arguments: strings)
    func objectsAreWrittenExactlyAsJSONEncoderWritesThem(string: String) throws {
        for sample in [
            Sample(absent: nil, count: -42, flag: true, price: Decimal(string: "-1234.5678"), text: string),
            Sample(absent: string, count: nil, flag: false, price: nil, text: string),
        ] {
            var text = ""
            JSONText.appendObject(to: &text) { object in
                object.string("absent", sample.absent)
                object.integer("count", sample.count)
                object.bool("flag", sample.flag)
                object.decimal("price", sample.price)
                object.string("text", sample.text)
            }
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            #expect(Array(text.utf8) == Array(try encoder.encode(sample)))
        }
    }

    @Test func nestedObjectsAndAnEmptyObject() {
        var text = "["
        JSONText.appendObject(to: &text) { object in
            object.object("inner") { inner in inner.bool("ok", true) }
            object.object("empty") { _ in }
        }
        #expect(text == #"[{"inner":{"ok":true},"empty":{}}"#)
    }
}
