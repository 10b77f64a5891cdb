import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Synchronization

/// An operator with the console's overview open, refreshing it every second: `bench --console-refresh`.
final class ConsoleRefresher: Sendable {
    private let task: Task<(pages: Int, failures: Int), Never>

    init(url: String, every interval: Duration = .seconds(1)) {
        task = Task {
            let client = HTTPClient(eventLoopGroupProvider: .singleton)
            var pages = 0
            var failures = 0
            while !Task.isCancelled {
                do {
                    let response = try await client.execute(HTTPClientRequest(url: url), timeout: .seconds(10))
                    let body = try await response.body.collect(upTo: 4 << 20)
                    if response.status.code == 200, body.readableBytes > 0 { pages += 1 } else { failures += 1 }
                } catch is CancellationError {
                    break
                } catch {
                    if !Task.isCancelled { failures += 1 }
                }
                do { try await Task.sleep(for: interval) } catch { break }
            }
            try? await client.shutdown()
            return (pages, failures)
        }
    }

    /// Stops refreshing; the overviews served and the requests that failed.
    @discardableResult
    func stop() async -> (pages: Int, failures: Int) {
        task.cancel()
        return await task.value
    }

    func cancel() {
        task.cancel()
    }
}
