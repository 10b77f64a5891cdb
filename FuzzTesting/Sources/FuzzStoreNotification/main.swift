import FuzzSupport

// libFuzzer's entry point: one record of the store-notifications topic (docs/fuzzing.md). Returns 0; a broken promise
// traps.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzStoreNotification(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    StoreNotifications.check(Array(UnsafeRawBufferPointer(start: start, count: count)))
    return 0
}
