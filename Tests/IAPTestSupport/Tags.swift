import Testing

extension Tag {
    /// A test whose outcome depends on librdkafka's behaviour: the Kafka adapter, a consumer group and its rebalances,
    /// workers killed or stopped mid-batch, a real broker. `make test` runs every test on Debian's librdkafka (what
    /// the build links), then the tests with this tag again on the current librdkafka, on the mock cluster and on
    /// Tansu (scripts/test-lanes.py picks them by this tag). A test that exercises no Kafka behaviour runs once.
    @Tag public static var librdkafka: Self
}

extension Tag {
    /// A test that runs the previous version's executable (`IAP_WORKER_PREVIOUS_BIN`) beside this one. `make test`
    /// builds that version beside the other tests, at the lowest priority, when it is not cached yet:
    /// scripts/test-lanes.py starts the tests with this tag once it is there.
    @Tag public static var previousVersion: Self
}
