import Foundation

/// Validates JSON values against the JSON Schema keywords that `docs/schemas` uses (type, required,
/// properties, additionalProperties, enum, const, minLength, maxLength, minimum). A keyword it does not know
/// fails loudly, so a schema cannot silently outgrow it.
public struct SchemaValidator {
    public static let known: Set<String> = [
        "$schema", "$id", "title", "description", "type", "required", "properties", "additionalProperties", "enum",
        "const",
        "minLength", "maxLength", "minimum", "format",
    ]

    public let schema: [String: Any]

    public init(schema: [String: Any]) { self.schema = schema }

    /// The schema `docs/schemas/<name>.schema.json`.
    public static func load(_ name: String) throws -> SchemaValidator {
        let root = TestRepository.root
        let data = try Data(contentsOf: root.appendingPathComponent("docs/schemas/\(name).schema.json"))
        return SchemaValidator(schema: try JSONSerialization.jsonObject(with: data) as! [String: Any])
    }

    /// The violations of `value`, empty when it is valid.
    public func violations(of value: Any) -> [String] {
        Self.check(value, against: schema, at: "$")
    }

    public static func check(_ value: Any, against schema: [String: Any], at path: String) -> [String] {
        var problems = schema.keys.filter { !known.contains($0) }.map {
            "\(path): schema keyword \($0) is not supported"
        }
        if let type = schema["type"] {
            let types = (type as? [String]) ?? [type as? String ?? "?"]
            guard types.contains(where: { matches(value, type: $0) }) else {
                return problems + ["\(path): \(describe(value)) is not \(types.joined(separator: " or "))"]
            }
        }
        if let allowed = schema["enum"] as? [Any], !allowed.contains(where: { equal($0, value) }) {
            problems.append("\(path): \(describe(value)) is not one of the allowed values")
        }
        if let constant = schema["const"], !equal(constant, value) {
            problems.append("\(path): \(describe(value)) is not \(constant)")
        }
        if let string = value as? String {
            if let min = schema["minLength"] as? Int, string.count < min {
                problems.append("\(path): shorter than \(min)")
            }
            if let max = schema["maxLength"] as? Int, string.count > max {
                problems.append("\(path): longer than \(max)")
            }
        }
        if let number = value as? NSNumber, !isBool(value), let minimum = schema["minimum"] as? Double,
            number.doubleValue < minimum
        {
            problems.append("\(path): below \(minimum)")
        }
        if let object = value as? [String: Any] {
            for key in schema["required"] as? [String] ?? [] where object[key] == nil {
                problems.append("\(path): \(key) is missing")
            }
            let properties = schema["properties"] as? [String: [String: Any]] ?? [:]
            for (key, member) in object {
                if let property = properties[key] {
                    problems += check(member, against: property, at: "\(path).\(key)")
                } else if schema["additionalProperties"] as? Bool == false {
                    problems.append("\(path): \(key) is not allowed")
                }
            }
        }
        return problems
    }

    static func isBool(_ value: Any) -> Bool {
        // JSONSerialization gives booleans as NSNumber with the Objective-C type "c" (a char), numbers otherwise.
        guard let number = value as? NSNumber else { return false }
        return String(cString: number.objCType) == "c"
    }

    static func matches(_ value: Any, type: String) -> Bool {
        switch type {
        case "object": value is [String: Any]
        case "array": value is [Any]
        case "string": value is String
        case "boolean": isBool(value)
        case "integer":
            !isBool(value) && (value as? NSNumber).map { $0.doubleValue == $0.doubleValue.rounded() } == true
        case "number": !isBool(value) && value is NSNumber
        case "null": value is NSNull
        default: false
        }
    }

    static func equal(_ a: Any, _ b: Any) -> Bool {
        (a as? NSObject)?.isEqual(b) ?? false
    }

    static func describe(_ value: Any) -> String {
        value is String
            ? "a string" : value is [String: Any] ? "an object" : isBool(value) ? "a boolean" : "\(type(of: value))"
    }
}
