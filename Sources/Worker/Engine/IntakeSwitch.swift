import Kafka
import Synchronization

/// Pauses fetching from every assigned partition while any dependency holds intake (Gamebase down or refusing
/// the configuration, the ledger not answering), and resumes it when none does. Purchases already admitted wait
/// for the dependency themselves; pausing only stops more from piling up.
final class IntakeSwitch: Sendable {
    enum Reason: Hashable, Sendable {
        case gamebase
        case ledger
    }

    private let consumer: KafkaConsumer
    private let holds = Mutex<Set<Reason>>([])

    init(consumer: KafkaConsumer) {
        self.consumer = consumer
    }

    var isHeld: Bool { holds.withLock { !$0.isEmpty } }

    func set(_ reason: Reason, holding: Bool) {
        // Applied under the lock, so two changes at once cannot land in the wrong order (pause and resume only
        // record a wish for the poll thread; they never call back here).
        holds.withLock { holds in
            if holding { holds.insert(reason) } else { holds.remove(reason) }
            let partitions = Array(consumer.assignment)
            if holds.isEmpty { consumer.resume(partitions) } else { consumer.pause(partitions) }
        }
    }
}
