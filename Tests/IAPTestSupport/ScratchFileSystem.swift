import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A tmpfs of the test's own under /tmp: a real file system the test fills, grows and empties under a ledger while
/// the worker runs. Mounting needs root (as CI runs); ``isAvailable`` says whether this process can.
public final class ScratchFileSystem: Sendable {
    public let path: String
    private var fillerPath: String { path + "/filler" }

    /// Whether this process can mount one: root with the right to mount (not every container's root has it), tried
    /// once.
    public static let isAvailable: Bool = {
        guard geteuid() == 0, let trial = try? ScratchFileSystem(megabytes: 1) else { return false }
        trial.unmount()
        return true
    }()

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
        try? ScratchCommand.run("/bin/umount", ["-l", path])
        try? FileManager.default.removeItem(atPath: path)
    }

    private static func mount(_ arguments: [String]) throws {
        try ScratchCommand.run("/bin/mount", arguments)
    }
}

public struct ScratchFileSystemError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// An ext4 file system in an image file of the test's own, mounted through a loop device with
/// `errors=remount-ro`: a volume the test can make fail as a disk does (ext4 turns it read-only after an error),
/// then repair and mount again as an operator would (root only, as ``ScratchFileSystem``).
public final class ScratchVolume: Sendable {
    public let path: String
    private let image: String

    /// Whether loop devices and ext4's error trigger are there (mounting rights as ``ScratchFileSystem``).
    public static var isAvailable: Bool {
        ScratchFileSystem.isAvailable && FileManager.default.fileExists(atPath: "/dev/loop-control")
            && FileManager.default.fileExists(atPath: "/sys/fs/ext4")
            && FileManager.default.fileExists(atPath: "/sbin/mkfs.ext4")
    }

    public init(megabytes: Int) throws {
        let stem = "/tmp/iap-scratch-volume-\(UUID().uuidString.prefix(8))"
        path = stem
        image = stem + ".img"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        try ScratchCommand.run("/usr/bin/truncate", ["-s", "\(megabytes)M", image])
        try ScratchCommand.run("/sbin/mkfs.ext4", ["-q", "-F", image])
        try mount()
    }

    private func mount() throws {
        try ScratchCommand.run("/bin/mount", ["-o", "loop,errors=remount-ro", image, path])
    }

    /// The loop device's name (`loop3`) while mounted.
    private var device: String? {
        guard let mounts = try? String(contentsOfFile: "/proc/mounts", encoding: .utf8) else { return nil }
        for line in mounts.split(separator: "\n") {
            let fields = line.split(separator: " ")
            if fields.count > 1, fields[1] == path { return fields[0].split(separator: "/").last.map(String.init) }
        }
        return nil
    }

    /// Makes ext4 record an error, as a failed disk write does: with `errors=remount-ro` the file system turns
    /// read-only at once, for every descriptor open on it.
    public func failAsADiskDoes() throws {
        guard let device else { throw ScratchFileSystemError("\(path) is not mounted") }
        try "iap-worker test: a failing disk\n".write(
            toFile: "/sys/fs/ext4/\(device)/trigger_fs_error", atomically: false, encoding: .utf8)
    }

    /// Whether the file system is read-only now: mounted `ro`, or turned read-only by an error (`emergency_ro`, as
    /// newer kernels show it).
    public var isReadOnly: Bool {
        guard let mounts = try? String(contentsOfFile: "/proc/mounts", encoding: .utf8) else { return false }
        return mounts.split(separator: "\n").contains { line in
            let fields = line.split(separator: " ")
            guard fields.count > 3, fields[1] == path else { return false }
            let options = fields[3].split(separator: ",")
            return options.contains("ro") || options.contains("emergency_ro")
        }
    }

    /// What an operator does with a cloud volume: detach the failed mount (the worker's descriptors keep the old one
    /// alive), check and repair the file system, attach it again — as a new device — and mount it at the same place.
    /// (`mount -o loop` would reuse the old loop device, whose superblock the kernel keeps read-only while anything
    /// holds a file on it: on one device, only a worker restarted can use the repaired volume.)
    public func repairAndMountAgain() throws {
        try ScratchCommand.run("/bin/umount", ["-l", path])
        // e2fsck exits 1 when it corrected errors: a repaired file system.
        try ScratchCommand.run("/sbin/e2fsck", ["-f", "-y", image], acceptedStatuses: [0, 1])
        let device = try ScratchCommand.output("/sbin/losetup", ["--find", "--show", image])
        try ScratchCommand.run("/bin/mount", ["-o", "errors=remount-ro", device, path])
    }

    public func unmount() {
        try? ScratchCommand.run("/bin/umount", ["-l", path])
        // The loop devices attached to the image (the first one, and the one of the repair): detached now, or as
        // soon as nothing holds them (a worker's descriptors on the failed mount).
        let attached =
            (try? ScratchCommand.output("/sbin/losetup", ["--noheadings", "--output", "NAME", "-j", image])) ?? ""
        for device in attached.split(separator: "\n") where !device.isEmpty {
            try? ScratchCommand.run("/sbin/losetup", ["-d", String(device)])
        }
        try? FileManager.default.removeItem(atPath: path)
        try? FileManager.default.removeItem(atPath: image)
    }
}

enum ScratchCommand {
    static func run(_ executable: String, _ arguments: [String], acceptedStatuses: Set<Int32> = [0]) throws {
        _ = try output(executable, arguments, acceptedStatuses: acceptedStatuses)
    }

    /// Runs the command; returns its standard output, trimmed.
    static func output(_ executable: String, _ arguments: [String], acceptedStatuses: Set<Int32> = [0]) throws
        -> String
    {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let errors = Pipe()
        let output = Pipe()
        process.standardError = errors
        process.standardOutput = output
        try process.run()
        let printed = output.fileHandleForReading.readDataToEndOfFile()
        let message = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard acceptedStatuses.contains(process.terminationStatus) else {
            throw ScratchFileSystemError(
                "\(executable) \(arguments.joined(separator: " ")) ended \(process.terminationStatus): "
                    + String(decoding: message, as: UTF8.self))
        }
        return String(decoding: printed, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
