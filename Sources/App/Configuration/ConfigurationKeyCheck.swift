import Foundation
import Kafka
import Yams

/// Refuses configuration keys that are nobody's: a typo (`worker.max_inflight`, `gamebase.timout_ms`) would otherwise
/// leave the default in force while the file says otherwise, and nobody would know until production behaved unlike
/// it.
public enum ConfigurationKeyCheck {
    /// A key of the YAML file that is not a configuration key.
    public struct UnknownKey: Sendable, Hashable {
        public var key: String
        public var file: String
        /// 1-based.
        public var line: Int
        /// The known key nearest to it, when one is near enough to be what was meant.
        public var suggestion: String?
        /// For a known key given the wrong shape: what is wrong (`nil`: the key is unknown).
        public var problem: String?

        public init(key: String, file: String, line: Int, suggestion: String?, problem: String? = nil) {
            self.key = key
            self.file = file
            self.line = line
            self.suggestion = suggestion
            self.problem = problem
        }

        public var error: ConfigurationError {
            ConfigurationError(
                key: key,
                problem: "\(problem ?? "unknown key") (\(file):\(line))"
                    + (suggestion.map { "; did you mean \($0)?" } ?? ""))
        }
    }

    /// The names of every key, `kafka.librdkafka` standing for its subtree.
    static let known: [String] = ConfigurationKey.all.map {
        $0.name.hasSuffix(".<property>") ? String($0.name.dropLast(".<property>".count)) : $0.name
    }
    static let passThrough = "kafka.librdkafka"

    /// The keys of the YAML file at `path` that are no configuration key, in the file's order.
    public static func unknownKeys(inYAMLAt path: String) throws -> [UnknownKey] {
        let text = try String(contentsOfFile: path, encoding: .utf8)
        guard let root = try Yams.compose(yaml: text) else { return [] }
        var unknown: [UnknownKey] = []
        func walk(_ node: Node, _ prefix: String) {
            guard case .mapping(let mapping) = node else { return }
            for (keyNode, value) in mapping {
                let name = prefix.isEmpty ? (keyNode.string ?? "") : "\(prefix).\(keyNode.string ?? "")"
                let line = keyNode.mark?.line ?? 0
                // `kafka.librdkafka` is read as a section of `kafka` only: a dotted key at the top is nobody's.
                if name == passThrough, prefix == "kafka" { continue }
                if known.contains(name) {
                    switch value {
                    case .mapping, .sequence:
                        shapes.append(
                            UnknownKey(
                                key: name, file: path, line: line, suggestion: nil,
                                problem: "must be one value, not a list or a map"))
                    default: break
                    }
                    continue
                }
                if known.contains(where: { $0.hasPrefix(name + ".") }) {
                    switch value {
                    case .mapping: walk(value, name)
                    case .scalar(let scalar) where ["", "~", "null", "Null", "NULL"].contains(scalar.string):
                        break  // a section whose keys are all commented out
                    default:
                        shapes.append(
                            UnknownKey(
                                key: name, file: path, line: line, suggestion: nil, problem: "must be a section of keys"
                            ))
                    }
                    continue
                }
                unknown.append(UnknownKey(key: name, file: path, line: line, suggestion: nearest(to: name)))
            }
        }
        var shapes: [UnknownKey] = []
        walk(root, "")
        return unknown + shapes
    }

    /// Environment variables that look like the worker's (a section's prefix) but name no key: said as warnings, since
    /// the environment is shared with whatever else runs there.
    public static func unknownVariables(in environment: [String: String]) -> [String] {
        let names = Set(ConfigurationKey.all.map(\.environmentName))
        let prefixes = Set(known.compactMap { $0.split(separator: ".").first.map { $0.uppercased() + "_" } })
        return environment.keys.filter { name in
            prefixes.contains { name.hasPrefix($0) } && !names.contains(name) && !name.hasPrefix("KAFKA_LIBRDKAFKA_")
        }.sorted().map { name in
            let key = name.lowercased()
            let suggestion =
                nearest(to: key.replacingOccurrences(of: "_", with: "."), among: known.map { $0 })
                .map { " (did you mean \(ConfigurationKey.environmentName(of: $0))?)" } ?? ""
            return "environment variable \(name) names no configuration key\(suggestion)"
        }
    }

    /// The properties librdkafka refuses, with its message, as configuration errors of `kafka.librdkafka.<property>`.
    public static func librdkafkaProblems(_ properties: [String: String]) -> [ConfigurationError] {
        properties.sorted { $0.key < $1.key }.compactMap { key, value in
            KafkaConfiguration.problem(property: key, value: value).map {
                ConfigurationError(key: "\(passThrough).\(key)", problem: "librdkafka refuses it: \($0)")
            }
        }
    }

    /// The known key nearest to `name` by edit distance, when within a third of its length (at least 2).
    static func nearest(to name: String, among candidates: [String] = known) -> String? {
        let scored = candidates.map { ($0, distance(name, $0)) }.min { $0.1 < $1.1 }
        guard let (best, score) = scored, score <= max(2, name.count / 3) else { return nil }
        return best
    }

    /// Levenshtein distance over Unicode scalars.
    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a.unicodeScalars)
        let b = Array(b.unicodeScalars)
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var previous = Array(0...b.count)
        var current = Array(repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            swap(&previous, &current)
        }
        return previous[b.count]
    }
}

extension ConfigurationKey {
    /// The environment variable of a key name.
    static func environmentName(of name: String) -> String {
        name.uppercased().replacingOccurrences(of: ".", with: "_")
    }
}
