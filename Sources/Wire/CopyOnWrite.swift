/// A value kept in one heap allocation that its copies share until one of them changes it.
///
/// For the records a purchase carries across its suspension points (a grant, a rejection, Gamebase's answer): an
/// async function's frame holds a copy of every value alive across any of its suspension points, and the frames of a
/// purchase live as long as it is in flight. Inline, each copy of a grant was about 300 bytes of every such frame, and
/// the coalescers' and the flow's frames held a dozen (issue #39, docs/benchmarks.md); boxed, each copy is a pointer.
///
/// Sendable as `Array` is: the storage is changed in place only while this is its one reference, so no other copy,
/// on any thread, can see the change.
package struct CopyOnWrite<Value: Sendable>: @unchecked Sendable {
    @usableFromInline
    final class Storage {
        @usableFromInline var value: Value
        @usableFromInline init(_ value: Value) { self.value = value }
    }

    @usableFromInline var storage: Storage

    @inlinable
    package init(_ value: Value) {
        storage = Storage(value)
    }

    /// Inlinable, and read in place: a record's property reads one field, never a copy of them all.
    @inlinable
    package var value: Value {
        _read { yield storage.value }
        _modify {
            if !isKnownUniquelyReferenced(&storage) { storage = Storage(storage.value) }
            yield &storage.value
        }
    }
}

extension CopyOnWrite: Equatable where Value: Equatable {
    @inlinable
    package static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.storage === rhs.storage || lhs.value == rhs.value
    }
}

extension CopyOnWrite: Hashable where Value: Hashable {
    @inlinable
    package func hash(into hasher: inout Hasher) {
        hasher.combine(value)
    }
}
