import Testing

@testable import App

/// Which system zones `run` names GMT for Foundation (so that ICU's zone tables stay unloaded, issue #39): UTC under
/// any of its names, and nothing else.
@Suite("The default time zone where the system's is UTC")
struct UTCDefaultTimeZoneTests {
    @Test func theSystemZoneIsTZWhenSetElseWhereEtcLocaltimeLinks() {
        #expect(
            UTCDefaultTimeZone.systemZoneName(tz: "Etc/UTC", localtimeTarget: "/usr/share/zoneinfo/Asia/Seoul")
                == "Etc/UTC")
        #expect(UTCDefaultTimeZone.systemZoneName(tz: ":UTC", localtimeTarget: nil) == "UTC")
        #expect(UTCDefaultTimeZone.systemZoneName(tz: nil, localtimeTarget: "/usr/share/zoneinfo/Etc/UTC") == "Etc/UTC")
        #expect(UTCDefaultTimeZone.systemZoneName(tz: nil, localtimeTarget: "../usr/share/zoneinfo/UTC") == "UTC")
        #expect(
            UTCDefaultTimeZone.systemZoneName(tz: nil, localtimeTarget: "/usr/share/zoneinfo/Asia/Seoul")
                == "Asia/Seoul")
        // Nothing to go by: an empty TZ, a path, a file that is no link, a link outside zoneinfo.
        #expect(UTCDefaultTimeZone.systemZoneName(tz: "", localtimeTarget: "/usr/share/zoneinfo/UTC") == nil)
        #expect(UTCDefaultTimeZone.systemZoneName(tz: ":/etc/localtime", localtimeTarget: nil) == nil)
        #expect(UTCDefaultTimeZone.systemZoneName(tz: nil, localtimeTarget: nil) == nil)
        #expect(UTCDefaultTimeZone.systemZoneName(tz: nil, localtimeTarget: "/etc/my-zone") == nil)
        #expect(UTCDefaultTimeZone.systemZoneName(tz: nil, localtimeTarget: "/usr/share/zoneinfo/") == nil)
    }

    @Test func onlyUTCsOwnNamesCount() {
        for name in [
            "UTC", "Etc/UTC", "Etc/UCT", "Universal", "Etc/Zulu", "GMT", "Etc/GMT", "Etc/GMT+0", "GMT0", "UTC0",
        ] {
            #expect(UTCDefaultTimeZone.isUTC(name), "\(name)")
        }
        for name in [
            "Asia/Seoul", "Europe/London", "Etc/GMT+9", "Etc/GMT-1", "right/UTC", "posix/UTC", "UTC+9", "utc", "",
            String(repeating: "U", count: 8192),
        ] {
            #expect(!UTCDefaultTimeZone.isUTC(name), "\(name)")
        }
        #expect(!UTCDefaultTimeZone.applyWhereTheSystemIsUTC(tz: "Asia/Seoul", localtimeTarget: nil))
        #expect(!UTCDefaultTimeZone.applyWhereTheSystemIsUTC(tz: nil, localtimeTarget: nil))
    }
}
