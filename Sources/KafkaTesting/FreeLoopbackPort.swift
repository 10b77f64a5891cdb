import Foundation

#if canImport(Glibc)
    import Glibc
#endif

struct LocalPortError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A loopback port nothing listens on now (bound and released): for a listener whose port must be known before it
/// starts (the benchmark's console, tests).
public func freeLoopbackPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw LocalPortError("socket failed") }
    defer { close(fd) }
    var address = loopbackAddress(port: 0)
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
    }
    guard bound == 0 else { throw LocalPortError("bind failed") }
    let named = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    guard named == 0 else { throw LocalPortError("getsockname failed") }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// 127.0.0.1:`port` as an IPv4 socket address (port 0: any free one, for `bind`).
public func loopbackAddress(port: Int) -> sockaddr_in {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = UInt16(port).bigEndian
    return address
}
