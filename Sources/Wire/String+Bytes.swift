extension String {
    /// Whether both hold the same UTF-8 bytes. Identifiers from outside (userId, paymentSeq, tokens) are compared
    /// this way: `==` treats canonically equivalent strings as equal ("é" and "e\u{301}"), while the ledger, Gamebase
    /// and downstream systems tell them apart.
    public func hasSameBytes(as other: String) -> Bool {
        utf8.elementsEqual(other.utf8)
    }
}
