import Logging

public enum LoggingSetup {
    /// Installs the process's log handler once: JSON lines or swift-log's text handler, at `level`.
    public static func bootstrap(format: WorkerConfiguration.LogFormat, level: Logger.Level) {
        LoggingSystem.bootstrap { label in
            var handler: any LogHandler =
                switch format {
                case .json: JSONLogHandler(label: label)
                case .text: StreamLogHandler.standardError(label: label)
                }
            handler.logLevel = level
            return handler
        }
    }
}
