import AsyncHTTPClient
import Foundation
import Gamebase
import GamebaseHTTP
import NIOHTTP1
import Testing

@testable import GamebaseSimulator

/// List Consumables as the contract's §6 has it, and the simulator's settings for what §6 leaves unconfirmed.
@Suite("Gamebase simulator: List Consumables", .timeLimit(.minutes(1)))
struct SimulatorListConsumablesTests {
    typealias Support = GamebaseTestSupport
    typealias Raw = SimulatorConformanceTests

    static let payments = [
        Support.payment("1", user: "u1"), Support.payment("2", user: "u1", market: "AS", test: true),
        Support.payment("3", user: "u1", consumed: true), Support.payment("4", user: "u1", market: "AMAZON"),
        Support.payment("5", user: "u1", type: GamebaseProductType.autoRenewable),
        Support.payment("6", user: "u1", type: GamebaseProductType.consumableAutoRenewable),
        Support.payment("7", user: "u2"),
    ]

    @Test func itemsCarryNeitherUserIdNorProductTypeAndNoneIsAnEmptyArray() async throws {
        try await Support.withSimulator(payments: Self.payments) { _, url in
            let answer = try await Raw.request(Raw.path(url, "consumable"), method: .POST, body: #"{"userId":"u1"}"#)
            #expect(answer.status == 200)
            #expect(answer.resultCode == 0)
            let items = try #require(answer.json?["result"] as? [[String: Any]])
            // Unconsumed, consumable types, every store but AMAZON unless asked for by name.
            #expect(items.compactMap { $0["paymentSeq"] as? String } == ["1", "2", "6"])
            for item in items {
                #expect(item["userId"] == nil && item["productType"] == nil, "§6: no userId, no productType")
                #expect(item["accessToken"] as? String == "tok-\(item["paymentSeq"] as? String ?? "")")
                #expect(item["isConsumable"] == nil)
            }
            #expect((items[1]["isTestPurchase"] as? Bool) == true)
            let amazon = try await Raw.request(
                Raw.path(url, "consumable"), method: .POST, body: #"{"userId":"u1","marketIds":["AMAZON"]}"#)
            #expect((amazon.json?["result"] as? [[String: Any]])?.compactMap { $0["paymentSeq"] as? String } == ["4"])
            let nobody = try await Raw.request(
                Raw.path(url, "consumable"), method: .POST, body: #"{"userId":"nobody"}"#)
            #expect(nobody.resultCode == 0)
            #expect((nobody.json?["result"] as? [Any])?.isEmpty == true, "nothing unconsumed: an empty array")

            // The client reads the same.
            let client = Support.client(url)
            let listed = try await client.listConsumables(
                userId: "u1", marketIds: nil, transactionID: GamebaseTransactionID())
            #expect(listed.map(\.paymentSeq) == ["1", "2", "6"])
            #expect(
                try await client.listConsumables(
                    userId: "nobody", marketIds: nil, transactionID: GamebaseTransactionID()
                ).isEmpty)
            try await client.shutdown()
        }
    }

    @Test func subscriptionsAreListedOnlyWhenTheSimulatorIsToldTo() async throws {
        try await Support.withSimulator(payments: Self.payments) { simulator, url in
            let set = try await Raw.request("\(url)/admin/faults", method: .POST, body: #"{"listNonConsumables":true}"#)
            #expect(set.json?["listNonConsumables"] as? Bool == true)
            #expect(simulator.state.faults.listNonConsumables)
            let answer = try await Raw.request(Raw.path(url, "consumable"), method: .POST, body: #"{"userId":"u1"}"#)
            let items = try #require(answer.json?["result"] as? [[String: Any]])
            #expect(items.compactMap { $0["paymentSeq"] as? String } == ["1", "2", "5", "6"])
            #expect(items.allSatisfy { $0["productType"] == nil })
        }
    }

    @Test func aPaymentAddedAgainUnderItsTokenIsListedForItsNewUserOnly() async throws {
        try await Support.withSimulator(payments: Self.payments) { simulator, url in
            func listed(_ user: String) async throws -> [String]? {
                let answer = try await Raw.request(
                    Raw.path(url, "consumable"), method: .POST, body: #"{"userId":"\#(user)"}"#)
                return (answer.json?["result"] as? [[String: Any]])?.compactMap { $0["paymentSeq"] as? String }
            }
            let before = try await listed("u2")
            #expect(before == ["7"])
            // The same access token, now another user's payment: the simulator's per-user index follows it.
            simulator.state.add([Support.payment("7", user: "u3")])
            let (oldOwner, newOwner, other) = (try await listed("u2"), try await listed("u3"), try await listed("u1"))
            #expect(oldOwner == [])
            #expect(newOwner == ["7"])
            #expect(other == ["1", "2", "6"])
            // The index itself moved: the old user keeps no token of it (the answer alone would not show that, as a
            // listed payment's owner is checked again).
            #expect(simulator.state.indexedTokens(userId: "u2").isEmpty)
            #expect(simulator.state.indexedTokens(userId: "u3") == ["tok-7"])
        }
    }

    @Test func listCallsAreCountedPerUserWithTheirTimes() async throws {
        try await Support.withSimulator(payments: Self.payments) { _, url in
            let before = Date()
            for user in ["u1", "u2", "u1", "nobody"] {
                _ = try await Raw.request(Raw.path(url, "consumable"), method: .POST, body: #"{"userId":"\#(user)"}"#)
            }
            _ = try await Raw.request(Raw.path(url, "consumable"), method: .POST, body: #"{}"#)
            let counters = try await Raw.request("\(url)/admin/counters")
            #expect((counters.json?["lists"] as? [String: Int]) == ["u1": 2, "u2": 1, "nobody": 1])
            #expect((counters.json?["calls"] as? [String: Int])?["consumable"] == 5)
            let times = try #require(counters.json?["listTimes"] as? [String: [Int64]])
            #expect(times["u1"]?.count == 2)
            let first = try #require(times["u1"]?.first)
            #expect(first >= Int64(before.timeIntervalSince1970 * 1000) - 1)
        }
    }
}
