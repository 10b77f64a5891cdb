import Foundation
import Fulfilment
import Wire

/// `iap-worker find`'s text: a heading per purchase, then its timeline, one line per fact.
public enum FindTextRenderer {
    public static func render(_ result: FindResult) -> String {
        guard let kind = result.kind, !result.purchases.isEmpty else {
            return "nothing found for \(printable(result.id)) (tried it as paymentSeq, store payment id and userId)\n"
        }
        var out =
            "\(printable(result.id)): \(kind.rawValue.replacingOccurrences(of: "_", with: " ")), "
            + "\(result.purchases.count) purchase\(result.purchases.count == 1 ? "" : "s")\n"
        for purchase in result.purchases {
            let none =
                purchase.entries.first?.kind == .refusal
                ? "(none: a refused store notification)" : "(no paymentSeq: malformed message)"
            out += "\npurchase \(printable(purchase.paymentSeq ?? none))"
            if let userId = purchase.userId { out += "  userId \(printable(userId))" }
            if let paymentId = purchase.paymentId { out += "  paymentId \(printable(paymentId))" }
            out += "\n  status: \(printable(purchase.status))\n"
            for entry in purchase.entries {
                let origin = entry.origin.rawValue.padding(toLength: 14, withPad: " ", startingAt: 0)
                out += "  \(RFC3339.string(entry.time))  \(origin) \(printable(entry.summary))\n"
            }
            if let view = purchase.gamebase {
                out += "  gamebase now (\(RFC3339.string(view.checkedAt))): \(printable(view.difference))\n"
                if let payment = view.payment {
                    out +=
                        "    Get Payment Transaction: userId \(printable(payment.userId)), product \(printable(payment.gamebaseProductId ?? "-")), "
                        + "store \(printable(payment.marketId ?? "-")), price \(printable(payment.price ?? "-")) \(printable(payment.currency ?? "")), "
                        + "paymentId \(printable(payment.paymentId ?? "-")), isConsumable \(payment.isConsumable.map { "\($0)" } ?? "-")\n"
                }
                if let listed = view.listedUnconsumed {
                    out += "    List Consumables: \(listed ? "listed unconsumed" : "not listed unconsumed")\n"
                }
                if let error = view.error { out += "    error: \(printable(error))\n" }
            }
        }
        if let next = result.nextBefore {
            out +=
                "\nmore: iap-worker find --user \(exactShellWord(result.id)) "
                + "--before \(exactShellWord(CursorText.string(next)))\n"
        }
        return out
    }

    /// A word as a shell reads it: single-quoted unless it is plainly safe (a cursor holds its paymentSeq, which may
    /// hold any character). The console's command lines use it too.
    public static func shellWord(_ text: String) -> String {
        let safe = CharacterSet.alphanumerics.union(CharacterSet(charactersIn: "-_./:=@+"))
        if !text.isEmpty, text.unicodeScalars.allSatisfy({ safe.contains($0) && $0.isASCII }) { return text }
        return "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }

    /// A shell word that is safe on a terminal and gives the shell back `text` exactly: as ``shellWord(_:)``, or, when
    /// `text` holds characters ``printable(_:)`` would escape, ANSI-C quoted (`$'…'`) with those characters' bytes as
    /// `\xHH`. The next page's command line must carry the last row's paymentSeq byte for byte, or the page would skip
    /// or repeat rows; escaped for the eye only, it would be another paymentSeq.
    public static func exactShellWord(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: hidden) else { return shellWord(text) }
        var out = "$'"
        for scalar in text.unicodeScalars {
            switch scalar {
            case "'": out += "\\'"
            case "\\": out += "\\\\"
            case _ where hidden(scalar):
                for byte in String(scalar).utf8 {
                    // Always two digits: `\xA` before a hex digit would read as another byte.
                    out += "\\x" + (byte < 0x10 ? "0" : "") + String(byte, radix: 16, uppercase: true)
                }
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "'"
    }

    /// Control characters, and format characters (a bidi override, a zero-width space) that make a line read other
    /// than it is.
    public static func hidden(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || scalar.value == 0x7F || (0x80..<0xA0).contains(scalar.value)
            || scalar.properties.generalCategory == .format || scalar.value == 0x2028 || scalar.value == 0x2029
    }

    /// A value as it may be shown on a terminal: control characters (a hostile userId's newline or escape) escaped.
    public static func printable(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: hidden) else { return text }
        var out = ""
        for scalar in text.unicodeScalars {
            if hidden(scalar) {
                out += "\\u{\(String(scalar.value, radix: 16))}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
