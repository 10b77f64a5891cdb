import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A tmpfs of the test's own under /tmp: a real file system the test fills, grows and empties under a ledger while
/// the worker runs. Mounting needs root (as CI runs); ``isAvailable`` says whether this process can.
public final class ScratchFileSystem: Sendable {
    public let path: String
    private var fillerPath: String { path + "/filler" }

    public static var isAvailable: Bool { geteuid() == 0 }

    /// Mounts a tmpfs of `megabytes` at a new folder.
    public init(megabytes: Int) throws {
        path = "/tmp/iap-scratch-fs-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        try Self.mount(["-t", "tmpfs", "-o", "size=\(megabytes)m", "tmpfs", path])
    }

    /// Grows (or shrinks) the file system in place, files open or not: a volume resized under the worker.
    public func resize(megabytes: Int) throws {
        try Self.mount(["-o", "remount,size=\(megabytes)m", path])
    }

    /// Bytes still free for an unprivileged writer.
    public var freeBytes: Int64 {
        var info = statvfs()
        guard statvfs(path, &info) == 0 else { return 0 }
        return Int64(info.f_bavail) * Int64(info.f_frsize)
    }

    /// Writes a filler file until at most `leaving` bytes are free (0: until the file system refuses a write).
    public func fill(leaving: Int64 = 0) throws {
        let descriptor = open(fillerPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        guard descriptor >= 0 else { throw ScratchFileSystemError("cannot create \(fillerPath): errno \(errno)") }
        defer { close(descriptor) }
        let chunk = [UInt8](repeating: 0x5a, count: 64 << 10)
        while freeBytes > leaving {
            let wanted = Int(min(Int64(chunk.count), max(4096, freeBytes - leaving)))
            let written = chunk.withUnsafeBytes { write(descriptor, $0.baseAddress, wanted) }
            if written < 0 {
                if errno == ENOSPC { return }
                throw ScratchFileSystemError("filling \(path): errno \(errno)")
            }
            if written == 0 { return }
        }
    }

    /// Deletes the filler: the space comes back.
    public func removeFiller() throws {
        try FileManager.default.removeItem(atPath: fillerPath)
    }

    /// Unmounts (lazily: a process still holding a file does not keep the test from ending) and removes the folder.
    public func unmount() {
        try? Self.run("/bin/umount", ["-l", path])
        try? FileManager.default.removeItem(atPath: path)
    }

    private static func mount(_ arguments: [String]) throws {
        try run("/bin/mount", arguments)
    }

    private static func run(_ executable: String, _ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let errors = Pipe()
        process.standardError = errors
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            throw ScratchFileSystemError("\(executable) \(arguments.joined(separator: " ")): \(message)")
        }
    }
}

public struct ScratchFileSystemError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
