import CRdKafka

extension KafkaConfiguration {
    /// librdkafka's own verdict on one property, without creating a client: `nil` when it takes the property and its
    /// value, otherwise its message (a secret's value is never quoted).
    public static func problem(property key: String, value: String) -> String? {
        guard let conf = rd_kafka_conf_new() else { return "librdkafka could not make a configuration" }
        defer { rd_kafka_conf_destroy(conf) }
        var errstr = [CChar](repeating: 0, count: 512)
        guard rd_kafka_conf_set(conf, key, value, &errstr, errstr.count) != RD_KAFKA_CONF_OK else { return nil }
        return isSecret(key) ? "invalid value for configuration property \"\(key)\"" : String(errorBuffer: errstr)
    }
}
