#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Flushes stdout, so a parent process reading a pipe sees lines at once.
public func fflushStandardOutput() {
    fflush(nil)  // nil flushes every output stream, stdout included
}
