import Foundation

/// The repository the tests were built from: where they read the documents, scripts and configuration they hold to
/// the code (README, docs/, config/, scripts/).
public enum TestRepository {
    /// The repository's root, found from this file's place (`Tests/IAPTestSupport/`), however deep a test's own file.
    public static let root: URL = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()
}
