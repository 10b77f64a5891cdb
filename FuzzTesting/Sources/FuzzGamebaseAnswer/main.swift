import FuzzSupport

// libFuzzer's entry point: one Gamebase answer body. Returns 0; a broken promise traps.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzGamebaseAnswer(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    GamebaseAnswers.check(Array(UnsafeRawBufferPointer(start: start, count: count)))
    return 0
}
