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
    /// tzdata's names for UTC (each also under `Etc/`), as ICU knows them. A POSIX string such as `UTC0` is not among
    /// them: Foundation does not know it either, and falls back to `/etc/localtime`.
    static let utcNames: Set<String> = [
        "UTC", "UCT", "Universal", "Zulu", "GMT", "GMT0", "GMT+0", "GMT-0", "Greenwich",
    ]

    /// The system's zone by Foundation's own rules (swift-foundation's `findCurrentTimeZone` on Linux): `TZ` when set
    /// and not empty, taken as it is; else the name `/etc/localtime` links to, after `/usr/share/zoneinfo/`. Nil where
    /// those rules read something else first (`TZFILE`) or find no name (a file that is no link, a link elsewhere).
    /// A `TZ` Foundation does not know falls back to `/etc/localtime` there; here it decides nothing, so it is only
    /// ever a UTC name that sets the default.
    static func systemZoneName(tz: String?, tzfile: String? = nil, localtimeTarget: String?) -> String? {
        if let tzfile, !tzfile.isEmpty { return nil }
        if let tz, !tz.isEmpty { return tz }
        guard let localtimeTarget, let range = localtimeTarget.range(of: "/usr/share/zoneinfo/") else { return nil }
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
        environment: [String: String] = ProcessInfo.processInfo.environment,
        localtimeTarget: String? = try? FileManager.default.destinationOfSymbolicLink(atPath: "/etc/localtime")
    ) -> Bool {
        guard
            let name = systemZoneName(
                tz: environment["TZ"], tzfile: environment["TZFILE"], localtimeTarget: localtimeTarget),
            isUTC(name)
        else { return false }
        NSTimeZone.default = .gmt
        return true
    }
}
