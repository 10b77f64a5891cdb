import Foundation
import Lookup
import Testing

/// The next page's command line that `find` prints: safe on a terminal, and the shell gives back the cursor's
/// paymentSeq byte for byte (else the next page would skip or repeat rows). Checked with bash itself.
@Suite("find's next-page command line in a real shell")
struct FindCommandLineTests {
    @Test(arguments: [
        "plain-seq_1", "a\u{1B}[31mred", "quote'and\\backslash", "bidi\u{202E}txt", "tab\there", "del\u{7F}A1",
        "\u{0B}0F", "zero\u{200B}width", "é/🎮 'x'",
        // What a shell would otherwise split, expand, drop or read as an option.
        "", "*", "-n", "a b", "$HOME", "`id`", "semi;colon",
    ])
    func aWordGivesTheShellBackItsTextExactly(text: String) throws {
        let word = FindTextRenderer.exactShellWord(text)
        #expect(!word.unicodeScalars.contains(where: FindTextRenderer.hidden), "\(word) is not safe on a terminal")
        let bash = Process()
        bash.executableURL = URL(fileURLWithPath: "/bin/bash")
        // Exactly one argument, and it is the text: not split, expanded or dropped.
        bash.arguments = ["-c", "set -- \(word); printf '%s:%s' \"$#\" \"$1\""]
        let output = Pipe()
        bash.standardOutput = output
        try bash.run()
        let bytes = output.fileHandleForReading.readDataToEndOfFile()
        bash.waitUntilExit()
        #expect(bash.terminationStatus == 0)
        #expect(Array(bytes) == Array("1:\(text)".utf8), "\(word)")
    }
}
