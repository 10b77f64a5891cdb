import Logging

public enum LoggingSetup {
    /// Installs the process's log handler once: JSON lines or swift-log's text handler, at `level`, with repeated
    /// warnings and errors of one kind written at most once every 10 s (``LogThrottle``).
    public static func bootstrap(format: WorkerConfiguration.LogFormat, level: Logger.Level) {
        LoggingSystem.bootstrap { label in
            let base: any LogHandler =
                switch format {
                case .json: JSONLogHandler(label: label)
                case .text: StreamLogHandler.standardError(label: label)
                }
            var handler = ThrottledLogHandler(base, label: label)
            handler.logLevel = level
            return handler
        }
    }
}
