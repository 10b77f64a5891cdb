// swift-tools-version:6.1
// The libFuzzer targets of iap-worker (docs/fuzzing.md). A package of its own, depending on the main one by path,
// so that a normal `swift build` of iap-worker never tries to link them: they need
// `swift build --sanitize=fuzzer --sanitize=address` (see `make fuzz`).
import PackageDescription

let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "iap-worker-fuzz",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "iap-worker", path: ".."),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
    ],
    targets: [
        .target(
            name: "FuzzSupport",
            dependencies: [
                .product(name: "IAPFuzzable", package: "iap-worker"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "FuzzPurchaseRecord",
            dependencies: ["FuzzSupport", .product(name: "IAPFuzzable", package: "iap-worker")],
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "FuzzGamebaseAnswer",
            dependencies: ["FuzzSupport", .product(name: "IAPFuzzable", package: "iap-worker")],
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "FuzzStoreNotification",
            dependencies: ["FuzzSupport", .product(name: "IAPFuzzable", package: "iap-worker")],
            swiftSettings: strictSettings
        ),
    ]
)
