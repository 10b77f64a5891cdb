import Fulfilment
import Testing

/// The token and claim hashes are stored in ledgers (rejection keys) and event ids: they must never change.
/// Expected values come from `sha256sum` and Python's `hashlib.sha256`, not from the code under test.
@Suite struct PurchaseMessageHashTests {
    static let eightKilobyteToken = String(repeating: "0123456789abcdef", count: 512)

    /// (token, SHA-256 hex): the empty string, one block, every padding boundary (55/56/63/64/65 bytes), several
    /// blocks, non-ASCII UTF-8 and the largest token a message may carry (8 KiB).
    static let vectors: [(String, String)] = [
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        (String(repeating: "a", count: 55), "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"),
        (String(repeating: "a", count: 56), "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"),
        (String(repeating: "a", count: 63), "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"),
        (String(repeating: "a", count: 64), "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"),
        (String(repeating: "a", count: 65), "635361c48bb9eab14198e76ea8ab7f1a41685d6ad62aa9146d301d4f17eb0ae0"),
        (String(repeating: "b", count: 119), "68297a9eb141ce16bbc0847da1c0c48e2858704feaa13993bde29f87a198a6e1"),
        (String(repeating: "c", count: 128), "e5dc28d67309c1f3b41b160e5e06c7881007cde8f74949c9cf6c890ad1bdd032"),
        ("토큰-✓-é", "86a3ce3bd654317e280d7e01eafbbae0e9b265034ee45696bd5efd5a747e4f0a"),
        (eightKilobyteToken, "d281ea21d2bc15d0f737288a081f5982ad6e08d836af73ca013ab00e469cf27f"),
    ]

    @Test(arguments: vectors)
    func tokenHashIsTheSHA256OfTheTokenInLowerCaseHex(token: String, expected: String) {
        #expect(PurchaseMessage(userId: "u", paymentSeq: "1", purchaseToken: token).tokenHash == expected)
    }

    @Test func claimHashIsTheFirstSixteenHexDigitsOfTheSHA256OfUserIdNewlineToken() {
        #expect(
            PurchaseMessage(userId: "user-1", paymentSeq: "1", purchaseToken: "gb-token-1").claimHash
                == "fb4dc3bf938d8ece")
        #expect(
            PurchaseMessage(userId: "user-1", paymentSeq: "1", purchaseToken: Self.eightKilobyteToken).claimHash
                == "c3f011f063605525")
    }
}
