import Foundation
import Fulfilment
import Wire

/// The text of a page cursor, as `find --before` and the console's `before=` take it and as they hand out the next
/// page's: `<time>/<id>` — an RFC 3339 time (UTC with milliseconds when handed out) and the id of the last row of the
/// page before (a paymentSeq, a dead letter's ledger row id) — or a time alone, typed by hand: the rows before it.
///
/// The text is split at the first `/` (RFC 3339 has none; a paymentSeq may hold any character, `/` too).
public enum CursorText {
    /// What ``purchase(_:)`` takes, for an error message.
    public static let purchaseForm =
        "an RFC 3339 time, optionally followed by /<paymentSeq> (as the previous page gives it)"
    /// What ``deadLetter(_:)`` takes, for an error message.
    public static let deadLetterForm = "an RFC 3339 time, optionally followed by /<id> (as the previous page gives it)"

    /// The cursor of a user's purchases; `nil` when the text is not one.
    public static func purchase(_ text: String) -> PurchaseCursor? {
        guard let (time, id) = split(text) else { return nil }
        return PurchaseCursor(firstSeen: time, paymentSeq: id)
    }

    /// The cursor of recorded dead letters, its id a whole number; `nil` when the text is not one.
    public static func deadLetter(_ text: String) -> DeadLetterCursor? {
        guard let (time, id) = split(text) else { return nil }
        guard let id else { return DeadLetterCursor(failedAt: time) }
        guard id.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }), let row = Int64(id) else {
            return nil
        }
        return DeadLetterCursor(failedAt: time, ledgerID: row)
    }

    public static func string(_ cursor: PurchaseCursor) -> String {
        string(cursor.firstSeen, cursor.paymentSeq)
    }

    public static func string(_ cursor: DeadLetterCursor) -> String {
        string(cursor.failedAt, cursor.ledgerID.map(String.init))
    }

    private static func string(_ time: Date, _ id: String?) -> String {
        RFC3339.string(time) + (id.map { "/" + $0 } ?? "")
    }

    /// The time and the id (`nil` without a `/`; never empty).
    private static func split(_ text: String) -> (Date, String?)? {
        let slash = text.firstIndex(of: "/")
        let time = slash.map { text[..<$0] } ?? text[...]
        // Only what RFC 3339 is written with.
        // At most milliseconds: the ledgers keep whole milliseconds, and a finer time would be rounded to one that can
        // fall on the wrong side of a row.
        guard !time.isEmpty, time.unicodeScalars.allSatisfy({ timeCharacters.contains($0) }),
            time.firstIndex(of: ".").map({ time[time.index(after: $0)...].prefix(while: \.isNumber).count <= 3 })
                ?? true,
            let date = RFC3339.date(String(time))
        else { return nil }
        guard let slash else { return (date, nil) }
        let id = text[text.index(after: slash)...]
        // A NUL no ledger can compare (PostgreSQL refuses it in text), and no id is this long.
        guard !id.isEmpty, id.utf8.count <= maxIDBytes, !id.utf8.contains(0) else { return nil }
        return (date, String(id))
    }

    /// The longest id a cursor carries.
    static let maxIDBytes = 1_024

    private static let timeCharacters = CharacterSet(charactersIn: "0123456789-:.+TZtz")
}
