import Kafka

extension WorkerConfiguration {
    /// The worker's Kafka settings (bootstrap servers, client id, `kafka.librdkafka.*` such as TLS and SASL) for a
    /// group-less reader — `events tail`, the console's record view: no subscription, no commit, no static membership.
    public func readerConfiguration(purpose: String) -> KafkaConsumerConfiguration {
        // Group settings mean nothing to a reader (and the session timeout of the workers' group is theirs).
        let groupOnly: Set<String> = [
            "group.id", "group.instance.id", "session.timeout.ms", "heartbeat.interval.ms",
            "partition.assignment.strategy",
            "max.poll.interval.ms", "auto.commit.interval.ms", "enable.auto.commit", "enable.auto.offset.store",
        ]
        var properties = librdkafka.filter { !groupOnly.contains($0.key) && !Self.producerOnly.contains($0.key) }
        properties["client.id"] = "\(clientID)-\(purpose)"
        properties["fetch.wait.max.ms"] = properties["fetch.wait.max.ms"] ?? "100"
        return .reader(
            bootstrapServers: bootstrapServers, groupIDPrefix: "\(clientID)-\(purpose)", properties: properties)
    }
}
