import Foundation

/// Foundation's default time zone for a process whose system zone is UTC, named so that it never loads ICU.
///
/// Hummingbird's Date-header cache (the admin server's and the console's) builds a Gregorian calendar at start, and a
/// calendar starts from the default zone: unless one is set, the system's, which Foundation resolves through ICU's zone
/// tables for every name but `GMT` (`/etc/localtime` → `Etc/UTC` on most images). Those pages, about 1.8 MiB, then stay
/// resident for the daemon's life (issue #39). So where the system's zone is UTC under any of its names, the default
/// zone is set to GMT: the same offset at every instant, so no time the worker writes changes. Any other zone is left
/// to Foundation, and libc's (`TZ`, `/etc/localtime`) is never touched.
package enum UTCDefaultTimeZone {
    /// tzdata's names for UTC (each also under `Etc/`), and the POSIX forms with a zero offset.
    static let utcNames: Set<String> = [
        "UTC", "UCT", "Universal", "Zulu", "GMT", "GMT0", "GMT+0", "GMT-0", "Greenwich", "UTC0",
    ]

    /// The system's zone as Foundation reads it: `TZ` when set (a leading `:` dropped), else the name
    /// `/etc/localtime` links to (after `zoneinfo/`). Nil when neither gives a name (a path, an empty `TZ`, a copied
    /// file): then nothing is decided here.
    static func systemZoneName(tz: String?, localtimeTarget: String?) -> String? {
        if let tz {
            let name = tz.hasPrefix(":") ? String(tz.dropFirst()) : tz
            return name.isEmpty || name.hasPrefix("/") ? nil : name
        }
        guard let localtimeTarget, let range = localtimeTarget.range(of: "zoneinfo/", options: .backwards) else {
            return nil
        }
        let name = String(localtimeTarget[range.upperBound...])
        return name.isEmpty ? nil : name
    }

    /// Whether `name` is one of UTC's names, with or without `Etc/` (`posix/` and `right/` are other files).
    static func isUTC(_ name: String) -> Bool {
        utcNames.contains(name.hasPrefix("Etc/") ? String(name.dropFirst(4)) : name)
    }

    /// Sets Foundation's default zone to GMT when the system's is UTC; answers whether it did. Call it before the
    /// first calendar or date formatter is made (it only changes what later ones start from).
    @discardableResult
    package static func applyWhereTheSystemIsUTC(
        tz: String? = ProcessInfo.processInfo.environment["TZ"],
        localtimeTarget: String? = try? FileManager.default.destinationOfSymbolicLink(atPath: "/etc/localtime")
    ) -> Bool {
        guard let name = systemZoneName(tz: tz, localtimeTarget: localtimeTarget), isUTC(name) else { return false }
        NSTimeZone.default = .gmt
        return true
    }
}
