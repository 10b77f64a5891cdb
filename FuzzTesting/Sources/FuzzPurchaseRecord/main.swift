import FuzzSupport

// libFuzzer's entry point: one purchase-record input (framing in docs/fuzzing.md). Returns 0; a broken promise traps.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPurchaseRecord(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    PurchaseRecordFuzz.run(Array(UnsafeRawBufferPointer(start: start, count: count)))
    return 0
}
