import AppStoreHTTP
import Configuration
import Console
import Engine
import Foundation
import Fulfilment
import Gamebase
import GamebaseHTTP
import GooglePlayHTTP
import Kafka
import Logging
import Stores
import SystemPackage
import Wire
import Yams

extension WorkerConfiguration {
    /// Loads the configuration: the YAML file (`configFile`, else `IAP_WORKER_CONFIG`), overridden by environment
    /// variables (key upper-cased, dots as underscores); the secret key may come from `gamebase.secret_key_file`.
    ///
    /// - Throws: ``ConfigurationError`` naming the key of the first invalid or missing value.
    public static func load(
        configFile: String? = nil, environment: [String: String] = ProcessInfo.processInfo.environment
    ) async throws -> WorkerConfiguration {
        // An empty IAP_WORKER_CONFIG means "no file", as an unset one does (handy to override an image's default).
        let path = configFile ?? environment["IAP_WORKER_CONFIG"].flatMap { $0.isEmpty ? nil : $0 }
        var providers: [any ConfigProvider] = [EnvironmentVariablesProvider(environmentVariables: environment)]
        var fileLibrdkafka: [String: String] = [:]
        if let path {
            guard FileManager.default.fileExists(atPath: path) else {
                throw ConfigurationError(key: "--config", problem: "no file at \(path)")
            }
            do {
                providers.append(try await FileProvider<YAMLSnapshot>(filePath: FilePath(path)))
            } catch {
                // The parser's message quotes the file, secrets included: only where it went wrong is said.
                throw ConfigurationError(
                    key: "--config", problem: "\(path) is not valid YAML\(Self.yamlErrorLine(error))")
            }
            let unknown = try ConfigurationKeyCheck.unknownKeys(inYAMLAt: path)
            if var error = unknown.first?.error {
                if unknown.count > 1 {
                    error.problem +=
                        "; also unknown: "
                        + unknown.dropFirst().map { "\($0.key) (line \($0.line))" }.joined(separator: ", ")
                }
                throw error
            }
            fileLibrdkafka = try librdkafkaProperties(fromYAMLAt: path)
        }
        let reader = ConfigReader(providers: providers)
        var configuration = try WorkerConfiguration(reader: reader)
        // kafka.librdkafka.<property>: from the file, then KAFKA_LIBRDKAFKA_<PROPERTY> (underscores as dots).
        configuration.librdkafka = fileLibrdkafka
        for (name, value) in environment where name.hasPrefix("KAFKA_LIBRDKAFKA_") {
            let property = name.dropFirst("KAFKA_LIBRDKAFKA_".count).lowercased().replacingOccurrences(
                of: "_", with: ".")
            configuration.librdkafka[property] = value
        }
        // librdkafka's own validation of every passed-through property, with its message, before any client exists.
        if let problem = ConfigurationKeyCheck.librdkafkaProblems(configuration.librdkafka).first { throw problem }
        configuration.warnings = ConfigurationKeyCheck.unknownVariables(in: environment)
        for key in configuration.refunds.unusedKeys {
            configuration.warnings.append(
                "\(key) is set but has no effect: no consumption answer is sent without refunds.apple.consumption_info "
                    + "(and the history poller, refunds.apple.issuer_id)")
        }
        if KafkaConsumerConfiguration.namesConsumerGroupProtocol(configuration.librdkafka["group.protocol"]),
            !Librdkafka.consumerGroupProtocolIsGA
        {
            configuration.warnings.append(
                "kafka.librdkafka.group.protocol is consumer (KIP-848), which librdkafka \(Librdkafka.versionString) "
                    + "has as early access or preview only: it is production-ready from 2.12.0 (docs/compatibility.md)")
        }
        return configuration
    }

    /// Reads and validates every key of ``ConfigurationKey/all`` from `reader`.
    init(reader: ConfigReader) throws {
        self.init()
        let values = ConfigValues(reader: reader)
        bootstrapServers = try values.string("kafka.bootstrap_servers", default: bootstrapServers)
        groupID = try values.string("kafka.group_id", default: groupID)
        clientID = try values.string("kafka.client_id", default: clientID)
        groupInstanceID = try values.optionalString("kafka.group_instance_id")
        topics.purchases = try values.string("kafka.topics.purchases", default: topics.purchases)
        topics.itemGranted = try values.string("kafka.topics.item_granted", default: topics.itemGranted)
        topics.consumeFailed = try values.string("kafka.topics.consume_failed", default: topics.consumeFailed)
        topics.deadLetter = try values.string("kafka.topics.dead_letter", default: topics.deadLetter)
        // The one key whose empty value means something: "" turns the topic off (DESIGN §2).
        topics.storeNotifications =
            try values.stringKeepingEmpty("kafka.topics.store_notifications")
            ?? topics.storeNotifications
        topics.itemRevoked = try values.string("kafka.topics.item_revoked", default: topics.itemRevoked)
        refunds = try Self.refunds(values)

        gamebaseBaseURL = try values.string("gamebase.base_url", default: gamebaseBaseURL)
        guard gamebaseBaseURL.hasPrefix("http://") || gamebaseBaseURL.hasPrefix("https://") else {
            throw ConfigurationError(key: "gamebase.base_url", problem: "must start with http:// or https://")
        }
        guard let host = URLComponents(string: gamebaseBaseURL)?.hostAsWritten, !host.isEmpty else {
            throw ConfigurationError(
                key: "gamebase.base_url", problem: "must name a host, as in https://api-gamebase.nhncloudservice.com")
        }
        gamebaseAppID = try values.required("gamebase.app_id")
        if let key = try values.optionalString("gamebase.secret_key", secret: true) {
            gamebaseSecretKey = Secret(key)
        } else if let file = try values.optionalString("gamebase.secret_key_file") {
            gamebaseSecretKey = try SecretKeyFile(path: file).read()
            gamebaseSecretKeyFile = file
        } else {
            throw ConfigurationError(key: "gamebase.secret_key", problem: "required (or gamebase.secret_key_file)")
        }
        gamebaseTimeoutMilliseconds = try values.int(
            "gamebase.timeout_ms", default: gamebaseTimeoutMilliseconds, in: 100...600_000)

        ledgerURL = try values.string("ledger.url", default: ledgerURL, secret: true)
        ledgerMinFreeBytes = try values.int("ledger.min_free_bytes", default: ledgerMinFreeBytes, in: 0...(1 << 50))

        maxInFlight = try values.int("worker.max_in_flight", default: maxInFlight, in: 1...65_536)
        // Each purchase in flight makes one Gamebase call at a time: fewer connections would queue calls in
        // the pool, where their timeout runs too.
        gamebaseMaxConnections = try values.int(
            "gamebase.max_connections", default: min(maxInFlight, Self.defaultMaxConnectionsLimit), in: 1...4_096)
        maxMessageBytes = try values.int("worker.max_message_bytes", default: maxMessageBytes, in: 256...10_000_000)
        maxBufferedBytes = try values.int(
            "worker.max_buffered_bytes", default: maxBufferedBytes, in: (4 << 20)...(16 << 30))
        let attempts = try values.int("worker.retry.max_attempts", default: 4, in: 1...100)
        let initial = try values.int("worker.retry.initial_backoff_ms", default: 200, in: 0...600_000)
        let maximum = try values.int("worker.retry.max_backoff_ms", default: 5_000, in: 0...3_600_000)
        guard maximum >= initial else {
            throw ConfigurationError(
                key: "worker.retry.max_backoff_ms", problem: "must not be below worker.retry.initial_backoff_ms")
        }
        retry = RetryPolicy(
            maxAttempts: attempts, initialBackoff: .milliseconds(initial), maxBackoff: .milliseconds(maximum))
        rejectTestPurchases = try values.bool("worker.reject_test_purchases", default: false)
        shutdownTimeoutMilliseconds = try values.int(
            "worker.shutdown_timeout_ms", default: shutdownTimeoutMilliseconds, in: 0...3_600_000)
        reconcile = try Self.reconcile(values)
        retention = try Self.retention(values, reconcile: reconcile)
        reconcile.prunesOwnState = retention.interval == nil

        serverPort = try values.int("server.port", default: serverPort, in: 0...65_535)
        (console, consoleTokenFile) = try Self.console(values)
        let level = try values.string("log.level", default: "info")
        guard let parsedLevel = Logger.Level(rawValue: level.lowercased()) else {
            throw ConfigurationError(
                key: "log.level", problem: "must be one of trace, debug, info, notice, warning, error, critical")
        }
        logLevel = parsedLevel
        let format = try values.string("log.format", default: "json")
        guard let parsedFormat = LogFormat(rawValue: format.lowercased()) else {
            throw ConfigurationError(key: "log.format", problem: "must be json or text")
        }
        logFormat = parsedFormat
    }

    /// `refunds.*`: the identifiers checked for their shape (they are compared with what the stores sign or send), the
    /// test roots' file for being readable PEM.
    /// A store API's base URL (`key`), when set: http(s) with a host; plain HTTP only to this machine (a simulator),
    /// since each call carries `secret`.
    static func storeBaseURL(_ values: ConfigValues, _ key: String, carrying secret: String) throws -> String? {
        guard let url = try values.optionalString(key) else { return nil }
        let host = URLComponents(string: url)?.hostAsWritten
        guard url.hasPrefix("https://") || url.hasPrefix("http://"), let host, !host.isEmpty else {
            throw ConfigurationError(key: key, problem: "must be an http(s) URL with a host")
        }
        guard url.hasPrefix("https://") || OutsideText.isLoopbackHost(host) else {
            throw ConfigurationError(
                key: key, problem: "must be https:// (each call carries \(secret)); http only to loopback")
        }
        return url
    }

    static func refunds(_ values: ConfigValues) throws -> Refunds {
        var refunds = Refunds()
        if let package = try values.optionalString("refunds.google.package_name") {
            guard package.utf8.count <= 255, package.contains("."),
                package.utf8.allSatisfy({ $0.isASCIIAlphanumeric || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "_") }
                )
            else {
                throw ConfigurationError(
                    key: "refunds.google.package_name",
                    problem: "must be an Android package name such as com.studio.game (letters, digits, _ and .)")
            }
            refunds.googlePackageName = package
        }
        if let file = try values.optionalString("refunds.google.service_account_file") {
            let key = "refunds.google.service_account_file"
            guard refunds.googlePackageName != nil else {
                throw ConfigurationError(key: key, problem: "set refunds.google.package_name too")
            }
            // Read no further than the bound: a key file is a few KiB, whatever the path leads to.
            guard let handle = FileHandle(forReadingAtPath: file),
                let data = try? handle.read(upToCount: 65_537), data.count <= 65_536
            else {
                throw ConfigurationError(key: key, problem: "cannot read \(file) as a JSON key file of at most 64 KiB")
            }
            try? handle.close()
            do {
                refunds.googleAccount = try GoogleServiceAccount(json: Array(data))
            } catch {
                throw ConfigurationError(key: key, problem: "\(file): \(error.description)")
            }
            refunds.googleServiceAccountFile = file
            if let url = try storeBaseURL(values, "refunds.google.base_url", carrying: "the service account's token") {
                refunds.googleBaseURL = url
            }
            refunds.googlePollInterval = .milliseconds(
                try values.int("refunds.google.interval_ms", default: 300_000, in: 1_000...86_400_000))
        } else if try values.optionalString("refunds.google.base_url") != nil {
            throw ConfigurationError(
                key: "refunds.google.base_url",
                problem: "set refunds.google.service_account_file too, or remove this key")
        }
        if let bundle = try values.optionalString("refunds.apple.bundle_id") {
            guard bundle.utf8.count <= 255,
                bundle.utf8.allSatisfy({
                    $0.isASCIIAlphanumeric || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "-")
                })
            else {
                throw ConfigurationError(
                    key: "refunds.apple.bundle_id",
                    problem: "must be a bundle id such as com.studio.game (letters, digits, - and .)")
            }
            refunds.appleBundleId = bundle
        }
        let environment = try values.string("refunds.apple.environment", default: "production").lowercased()
        guard ["production", "sandbox"].contains(environment) else {
            throw ConfigurationError(key: "refunds.apple.environment", problem: "must be production or sandbox")
        }
        refunds.appleEnvironment = environment
        if let file = try values.optionalString("refunds.apple.root_certificates_file") {
            let key = "refunds.apple.root_certificates_file"
            guard let data = FileManager.default.contents(atPath: file), data.count <= 1 << 20,
                let pem = String(data: data, encoding: .utf8)
            else {
                throw ConfigurationError(key: key, problem: "cannot read \(file) as a PEM file of at most 1 MiB")
            }
            do {
                _ = try AppleRootCertificates.certificates(pem: pem)
            } catch {
                throw ConfigurationError(key: key, problem: "\(file) \(error.detail)")
            }
            refunds.appleRootCertificatesFile = file
            refunds.appleRootCertificatesPEM = pem
        }
        if let issuer = try values.optionalString("refunds.apple.issuer_id") {
            guard let bundle = refunds.appleBundleId else {
                throw ConfigurationError(key: "refunds.apple.issuer_id", problem: "set refunds.apple.bundle_id too")
            }
            let keyId = try values.required("refunds.apple.key_id")
            let file = try values.required("refunds.apple.private_key_file")
            guard let data = FileManager.default.contents(atPath: file), data.count <= 16_384,
                let pem = String(data: data, encoding: .utf8)
            else {
                throw ConfigurationError(
                    key: "refunds.apple.private_key_file", problem: "cannot read \(file) as a .p8 key file")
            }
            do {
                refunds.appleKey = try AppStoreKey(issuerId: issuer, keyId: keyId, bundleId: bundle, pem: pem)
            } catch {
                throw ConfigurationError(key: "refunds.apple.private_key_file", problem: "\(file): \(error.message)")
            }
            refunds.applePrivateKeyFile = file
            refunds.appleBaseURL = try storeBaseURL(
                values, "refunds.apple.base_url", carrying: "the studio's signed token")
            refunds.applePollInterval = .milliseconds(
                try values.int("refunds.apple.interval_ms", default: 300_000, in: 1_000...86_400_000))
            if try values.bool("refunds.apple.consumption_info", default: false) {
                guard try values.bool("refunds.apple.customer_consented", default: false) else {
                    throw ConfigurationError(
                        key: "refunds.apple.customer_consented",
                        problem:
                            "Apple refuses consumption information without the player's consent: set it to true (your terms obtain that consent) or turn refunds.apple.consumption_info off"
                    )
                }
                let preference = try values.optionalString("refunds.apple.refund_preference")?.uppercased()
                if let preference, !["GRANT_FULL", "GRANT_PRORATED", "DECLINE"].contains(preference) {
                    throw ConfigurationError(
                        key: "refunds.apple.refund_preference", problem: "must be GRANT_FULL, GRANT_PRORATED or DECLINE"
                    )
                }
                // Apple waits 12 hours for an answer; a request is read by the poller before it can be answered.
                guard refunds.applePollInterval <= .seconds(3_600) else {
                    throw ConfigurationError(
                        key: "refunds.apple.interval_ms",
                        problem:
                            "at most 3600000 with refunds.apple.consumption_info: Apple waits 12 hours for an answer, "
                            + "and each request is read from the history first")
                }
                refunds.consumptionAnswers = ConsumptionAnswerer.Configuration(
                    customerConsented: true,
                    sampleContentProvided: try values.bool("refunds.apple.sample_content_provided", default: false),
                    refundPreference: preference)
            }
        } else {
            for key in ["refunds.apple.key_id", "refunds.apple.private_key_file", "refunds.apple.base_url"]
            where try values.optionalString(key) != nil {
                throw ConfigurationError(key: key, problem: "set refunds.apple.issuer_id too, or remove this key")
            }
            // `false` is what the shipped configuration file spells out: only asking for answers needs the poller.
            if try values.bool("refunds.apple.consumption_info", default: false) {
                throw ConfigurationError(
                    key: "refunds.apple.consumption_info",
                    problem: "answers need the history poller: set refunds.apple.issuer_id too, or set this to false")
            }
        }
        // The studio's statements for consumption answers, given while no answer is sent: said, not refused (the
        // default configuration file sets them to their defaults).
        if refunds.consumptionAnswers == nil {
            if try values.bool("refunds.apple.customer_consented", default: false) {
                refunds.unusedKeys.append("refunds.apple.customer_consented")
            }
            if try values.bool("refunds.apple.sample_content_provided", default: false) {
                refunds.unusedKeys.append("refunds.apple.sample_content_provided")
            }
            if try values.optionalString("refunds.apple.refund_preference") != nil {
                refunds.unusedKeys.append("refunds.apple.refund_preference")
            }
        }
        if refunds.appleBundleId == nil, refunds.appleRootCertificatesFile != nil {
            throw ConfigurationError(
                key: "refunds.apple.root_certificates_file",
                problem: "set refunds.apple.bundle_id too, or remove this key")
        }
        // A root other than Apple's believes whatever its holder signs: it is for a simulator's chain, so it needs a
        // simulator to read from. Against Apple's own hosts (or the topic alone) it is a test root left in a real
        // deployment, which would let anyone with its key revoke grants.
        // A fully qualified name's final dot names the same host: `api.storekit.itunes.apple.com.` is Apple's.
        let simulated = refunds.appleBaseURL.flatMap { URLComponents(string: $0)?.hostAsWritten?.lowercased() }.map {
            let host = $0.hasSuffix(".") ? String($0.dropLast()) : $0
            return host != "apple.com" && !host.hasSuffix(".apple.com")
        }
        if let pem = refunds.appleRootCertificatesPEM, simulated != true,
            try AppleRootCertificates.certificates(pem: pem) != [try AppleRootCertificates.rootCAG3()]
        {
            throw ConfigurationError(
                key: "refunds.apple.root_certificates_file",
                problem:
                    "trusts a root other than Apple Root CA - G3, which only a simulator's notifications need: remove the key (Apple's root is built in), or set refunds.apple.base_url to the simulator (not an apple.com host)"
            )
        }
        refunds.maxClockSkew = .milliseconds(
            try values.int("refunds.max_clock_skew_ms", default: 300_000, in: 1_000...3_600_000))
        return refunds
    }

    /// `reconcile.*`.
    static func reconcile(_ values: ConfigValues) throws -> Reconciler.Configuration {
        let interval = try values.int("reconcile.interval_ms", default: 600_000, in: 0...86_400_000)
        if interval > 0, interval < 1_000 {
            throw ConfigurationError(key: "reconcile.interval_ms", problem: "must be 0 (off) or at least 1000")
        }
        let grace = try values.int("reconcile.grace_ms", default: 600_000, in: 0...604_800_000)
        let lookback = try values.int("reconcile.lookback_hours", default: 72, in: 1...8_760)
        let rate = try values.int("reconcile.max_calls_per_second", default: 20, in: 1...10_000)
        // Sightings (and so a payment's grace) are pruned once older than the lookback window, and users are those
        // active within it: combinations under which nothing could ever be taken are refused, not run.
        let lookbackMs = lookback * 3_600_000
        if interval > 0 {
            if interval > lookbackMs {
                throw ConfigurationError(
                    key: "reconcile.interval_ms",
                    problem: "\(interval) exceeds reconcile.lookback_hours (\(lookback) h = \(lookbackMs) ms): a user "
                        + "active only between two passes would never be checked")
            }
            // The pass that takes a payment is the first one at least grace_ms after the pass that first saw it.
            let takenAfter = (grace + interval - 1) / interval * interval
            if grace >= lookbackMs || takenAfter > lookbackMs {
                throw ConfigurationError(
                    key: "reconcile.grace_ms",
                    problem: "\(grace) with reconcile.interval_ms \(interval) takes a payment \(takenAfter) ms after "
                        + "its first sighting, not before reconcile.lookback_hours (\(lookback) h = \(lookbackMs) ms) "
                        + "prunes that sighting: nothing would ever be taken")
            }
        }
        return Reconciler.Configuration(
            interval: .milliseconds(interval), grace: .milliseconds(grace), lookback: .seconds(lookback * 3_600),
            maxCallsPerSecond: rate)
    }

    /// `console.*`: the token file read now, so a missing or weak token stops the start, naming the key.
    static func console(_ values: ConfigValues) throws -> (ConsoleConfiguration, tokenFile: String?) {
        let port = try values.int("console.port", default: 8081, in: 0...65_535)
        let address = try values.string("console.address", default: "127.0.0.1")
        guard address.utf8.count <= 255, !address.contains(where: { $0.isWhitespace || $0 == "/" }) else {
            throw ConfigurationError(key: "console.address", problem: "must be an IP address or a host name")
        }
        let tokenFile = try values.optionalString("console.token_file")
        var access = ConsoleAccess.loopbackOnly
        // Read only for a console that listens: `find`, `reprocess` and the rest load this configuration too.
        if let tokenFile, port != 0 {
            do {
                access = ConsoleAccess(token: try ConsoleAccess.token(fromFile: tokenFile))
            } catch let error as ConsoleError {
                throw ConfigurationError(key: "console.token_file", problem: error.message)
            }
        }
        let environment = try values.string("console.environment", default: "")
        guard environment.count <= 64, !environment.unicodeScalars.contains(where: { $0.value < 0x20 }) else {
            throw ConfigurationError(key: "console.environment", problem: "must be one line of 64 characters at most")
        }
        let console = ConsoleConfiguration(
            port: port, address: address, access: access, environment: environment,
            showPayloads: try values.bool("console.show_payloads", default: false))
        do {
            try console.validate()
        } catch let error as ConsoleError {
            throw ConfigurationError(key: error.key, problem: error.message)
        }
        return (console, tokenFile)
    }

    /// `ledger.retention.*`.
    static func retention(_ values: ConfigValues, reconcile: Reconciler.Configuration) throws -> RetentionPolicy {
        var policy = RetentionPolicy()
        // At most an hour: the pruning alert fires when no pass caught up for an hour.
        let interval = try values.int("ledger.retention.interval_ms", default: 300_000, in: 0...3_600_000)
        if interval > 0, interval < 1_000 {
            throw ConfigurationError(key: "ledger.retention.interval_ms", problem: "must be 0 (off) or at least 1000")
        }
        policy.interval = interval > 0 ? .milliseconds(interval) : nil
        policy.batchRows = try values.int("ledger.retention.batch_rows", default: policy.batchRows, in: 10...100_000)
        policy.publishedOutboxHours = try values.int(
            "ledger.retention.published_outbox_hours", default: policy.publishedOutboxHours, in: 0...87_600)
        policy.rejectionsDays = try values.int(
            "ledger.retention.rejections_days", default: policy.rejectionsDays, in: 0...3_650)
        policy.unconfirmedRejectionsHours = try values.int(
            "ledger.retention.unconfirmed_rejections_hours", default: policy.unconfirmedRejectionsHours, in: 0...87_600)
        policy.deadLettersDays = try values.int(
            "ledger.retention.dead_letters_days", default: policy.deadLettersDays, in: 0...3_650)
        policy.storeNotificationsDays = try values.int(
            "ledger.retention.store_notifications_days", default: policy.storeNotificationsDays, in: 0...3_650)
        policy.maxUnconfirmedRows = try values.int(
            "ledger.retention.max_unconfirmed_rows", default: policy.maxUnconfirmedRows, in: 0...1_000_000_000)
        if policy.maxUnconfirmedRows > 0, policy.maxUnconfirmedRows < 1_000 {
            throw ConfigurationError(
                key: "ledger.retention.max_unconfirmed_rows", problem: "must be 0 (no bound) or at least 1000")
        }
        policy.reconciliationWindow = reconcile.lookback
        // A confirmed rejection whose payment stays unconsumed (a test purchase) is what keeps the reconciler from
        // judging it again at every pass; it must outlive the window in which its user is reconciled.
        let lookbackHours = Int(reconcile.lookback.components.seconds / 3_600)
        if reconcile.isEnabled, policy.rejectionsDays > 0, policy.rejectionsDays * 24 < lookbackHours {
            throw ConfigurationError(
                key: "ledger.retention.rejections_days",
                problem: "\(policy.rejectionsDays) days is shorter than reconcile.lookback_hours (\(lookbackHours) h): "
                    + "a payment rejected and left unconsumed (a test purchase) would be judged again, and its "
                    + "rejection recorded again, each time the rejection is pruned")
        }
        return policy
    }

    /// ` (line N)` from a YAML parser's error, when it names one; never the quoted text.
    static func yamlErrorLine(_ error: any Error) -> String {
        let text = "\(error)"
        guard let range = text.range(of: #"line (\d+)"#, options: .regularExpression) else {
            return " (a duplicate key, a tab, a bad indent…)"
        }
        return " (\(text[range]))"
    }

    /// `kafka.librdkafka` of a YAML file, flattened to librdkafka property names.
    static func librdkafkaProperties(fromYAMLAt path: String) throws -> [String: String] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return [:] }
        let root: Any?
        do { root = try Yams.load(yaml: text) } catch {
            throw ConfigurationError(key: "--config", problem: "\(path) is not valid YAML")
        }
        guard let kafka = (root as? [String: Any])?["kafka"] as? [String: Any], let section = kafka["librdkafka"] else {
            return [:]
        }
        guard let map = section as? [String: Any] else {
            throw ConfigurationError(key: "kafka.librdkafka", problem: "must be a map of librdkafka properties")
        }
        var properties: [String: String] = [:]
        func flatten(_ prefix: String, _ value: Any) throws {
            if let nested = value as? [String: Any] {
                for (key, inner) in nested { try flatten(prefix.isEmpty ? key : "\(prefix).\(key)", inner) }
            } else if value is [Any] {
                throw ConfigurationError(key: "kafka.librdkafka.\(prefix)", problem: "must be a scalar")
            } else {
                properties[prefix] = "\(value)"
            }
        }
        try flatten("", map)
        return properties
    }
}

/// Reads values as text and validates them itself, so a bad value fails naming its key (the reader's typed
/// accessors would quietly fall back to a default).
struct ConfigValues {
    let reader: ConfigReader

    func optionalString(_ key: String, secret: Bool = false) throws -> String? {
        guard let value = reader.string(forKey: ConfigKey(key), isSecret: secret) else { return nil }
        let trimmed = value.trimmingCharacters(in: .whitespacesAndNewlines)
        return trimmed.isEmpty ? nil : trimmed
    }

    /// The value trimmed, `""` when set empty; `nil` only when the key is absent.
    func stringKeepingEmpty(_ key: String) throws -> String? {
        reader.string(forKey: ConfigKey(key)).map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
    }

    func string(_ key: String, default defaultValue: String, secret: Bool = false) throws -> String {
        try optionalString(key, secret: secret) ?? defaultValue
    }

    func required(_ key: String) throws -> String {
        guard let value = try optionalString(key) else { throw ConfigurationError(key: key, problem: "required") }
        return value
    }

    func int(_ key: String, default defaultValue: Int, in range: ClosedRange<Int>) throws -> Int {
        guard let text = try optionalString(key) else { return defaultValue }
        guard let value = Int(text) else {
            throw ConfigurationError(key: key, problem: "\"\(text)\" is not a whole number")
        }
        guard range.contains(value) else {
            throw ConfigurationError(key: key, problem: "\(value) is outside \(range.lowerBound)…\(range.upperBound)")
        }
        return value
    }

    func bool(_ key: String, default defaultValue: Bool) throws -> Bool {
        guard let text = try optionalString(key) else { return defaultValue }
        switch text.lowercased() {
        case "true", "yes", "1", "on": return true
        case "false", "no", "0", "off": return false
        default: throw ConfigurationError(key: key, problem: "\"\(text)\" is not true or false")
        }
    }
}
