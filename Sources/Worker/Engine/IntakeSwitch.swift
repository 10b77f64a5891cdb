import Foundation
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
    /// When intake last started flowing (the switch's creation, or the end of the last hold); `nil` while held.
    private let flowing = Mutex<Date?>(Date())

    init(consumer: KafkaConsumer) {
        self.consumer = consumer
    }

    var isHeld: Bool { holds.withLock { !$0.isEmpty } }

    /// Since when intake has flowed without a hold; `nil` while it is held. The reconciler waits a grace period
    /// after it, so it does not race messages that a hold kept waiting.
    var flowingSince: Date? { flowing.withLock { $0 } }

    func set(_ reason: Reason, holding: Bool) {
        // Applied under the lock, so two changes at once cannot land in the wrong order (pause and resume only
        // record a wish for the poll thread; they never call back here).
        holds.withLock { holds in
            if holding { holds.insert(reason) } else { holds.remove(reason) }
            flowing.withLock { since in
                if !holds.isEmpty { since = nil } else if since == nil { since = Date() }
            }
            let partitions = Array(consumer.assignment)
            if holds.isEmpty { consumer.resume(partitions) } else { consumer.pause(partitions) }
        }
    }
}
