/// An app store whose refunds the worker takes in.
public enum Store: String, Sendable, Hashable, CaseIterable {
    case apple
    case google
}
