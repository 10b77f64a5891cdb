#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Flushes stdout, so a parent process reading a pipe sees lines at once.
public func fflushStandardOutput() {
    fflush(nil)  // nil flushes every output stream, stdout included
}

/// Ends the process with status 0 once a command has shut down cleanly (its Kafka handles closed, its ledger closed,
/// its output flushed here). `exit` would then run the C and C++ static destructors while librdkafka's own threads may
/// still be winding down after the last handle was closed: with librdkafka 2.16 a worker that had logged `stopped`
/// was seen to end by SIGSEGV (status 11, 139 in a container) that way, once in a few hundred stops.
public func exitAfterCleanShutdown() -> Never {
    fflush(nil)
    _exit(0)
}
