import Testing

extension Tag {
    /// A test whose outcome depends on librdkafka's behaviour: the Kafka adapter, a consumer group and its rebalances,
    /// workers killed or stopped mid-batch, a real broker. `make test` runs every test on Debian's librdkafka (what
    /// the build links), then the tests with this tag again on the current librdkafka, on the mock cluster and on
    /// Tansu (scripts/test-lanes.py picks them by this tag). A test that exercises no Kafka behaviour runs once.
    @Tag public static var librdkafka: Self
}
