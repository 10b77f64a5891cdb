import Testing

@testable import App

/// Which system zones `run` names GMT for Foundation (so that ICU's zone tables stay unloaded, issue #39): UTC under
/// any of its names, read by Foundation's own rules, and nothing else.
@Suite("The default time zone where the system's is UTC")
struct UTCDefaultTimeZoneTests {
    typealias Zone = UTCDefaultTimeZone
    static let seoul = "/usr/share/zoneinfo/Asia/Seoul"

    @Test func theSystemZoneIsTZWhenSetElseWhereEtcLocaltimeLinks() {
        #expect(Zone.systemZoneName(tz: "Etc/UTC", localtimeTarget: Self.seoul) == "Etc/UTC")
        #expect(Zone.systemZoneName(tz: nil, localtimeTarget: "/usr/share/zoneinfo/Etc/UTC") == "Etc/UTC")
        #expect(Zone.systemZoneName(tz: nil, localtimeTarget: "../usr/share/zoneinfo/UTC") == "UTC")
        #expect(Zone.systemZoneName(tz: nil, localtimeTarget: Self.seoul) == "Asia/Seoul")
        // An empty TZ is no TZ: Foundation reads /etc/localtime.
        #expect(Zone.systemZoneName(tz: "", localtimeTarget: "/usr/share/zoneinfo/UTC") == "UTC")
        // TZ as it is: `:UTC` is no name Foundation knows (it would read /etc/localtime, Seoul here), so no UTC.
        #expect(Zone.systemZoneName(tz: ":UTC", localtimeTarget: Self.seoul) == ":UTC")
        #expect(!Zone.isUTC(":UTC"))
        // Foundation reads TZFILE first: nothing is decided then.
        #expect(Zone.systemZoneName(tz: "UTC", tzfile: "/etc/zone", localtimeTarget: nil) == nil)
        // Nothing to go by: no link, a link outside zoneinfo, a link to the folder itself.
        #expect(Zone.systemZoneName(tz: nil, localtimeTarget: nil) == nil)
        #expect(Zone.systemZoneName(tz: nil, localtimeTarget: "/etc/my-zone") == nil)
        #expect(Zone.systemZoneName(tz: nil, localtimeTarget: "/usr/share/zoneinfo/") == nil)
    }

    @Test func onlyUTCsOwnNamesCount() {
        for name in ["UTC", "Etc/UTC", "Etc/UCT", "Universal", "Etc/Zulu", "GMT", "Etc/GMT", "Etc/GMT+0", "GMT0"] {
            #expect(Zone.isUTC(name), "\(name)")
        }
        for name in [
            "Asia/Seoul", "Europe/London", "Etc/GMT+9", "Etc/GMT-1", "GMT+9", "right/UTC", "posix/UTC", "UTC+9",
            "UTC0", "utc", "", String(repeating: "U", count: 8192),
        ] {
            #expect(!Zone.isUTC(name), "\(name)")
        }
    }

    /// Where the zone is not UTC, the default is left alone (this process's own default is never set here).
    @Test func anotherZoneIsLeftToFoundation() {
        #expect(!Zone.applyWhereTheSystemIsUTC(environment: ["TZ": "Asia/Seoul"], localtimeTarget: nil))
        #expect(!Zone.applyWhereTheSystemIsUTC(environment: [:], localtimeTarget: Self.seoul))
        #expect(!Zone.applyWhereTheSystemIsUTC(environment: ["TZFILE": "/x", "TZ": "UTC"], localtimeTarget: nil))
        #expect(!Zone.applyWhereTheSystemIsUTC(environment: [:], localtimeTarget: nil))
    }
}
