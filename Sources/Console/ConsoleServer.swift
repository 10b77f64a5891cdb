import Foundation
import Fulfilment
import Gamebase
import HTTPTypes
import Hummingbird
import Logging
import Lookup
import NIOCore
import ServiceLifecycle
import Synchronization

/// The operator console (`console.*`): a read-only web page on its own listener, served while the worker runs.
///
/// Pages: the overview (`/`), search (`/search?q=`), a purchase's timeline (`/purchase?seq=`), a user's purchases
/// (`/user?id=`), dead letters (`/dead-letters`), refunds (`/refunds`); each also as JSON with `Accept: application/json`. Every ledger read
/// has a deadline and at most a few run at once; the overview's counts come from the worker's own status.
///
/// A listener that cannot be opened (the port is taken) is logged as an error and the worker goes on without its
/// console: purchases never wait for a page.
public final class ConsoleServer: Service {
    let configuration: ConsoleConfiguration
    let site: ConsoleSite
    let logger: Logger
    private let boundPort = Mutex<Int?>(nil)

    /// - Parameters:
    ///   - reader: the ledger's read port (the console adds the deadlines).
    ///   - gamebase: for "ask Gamebase now" (read-only calls); `nil` hides nothing, the button then says it cannot.
    ///   - reconcileGrace: to say when a sighting will be taken, as `find` does.
    ///   - records: the dead-letter topic, for a record's value when `console.show_payloads` is on.
    ///   - refunds: the ledger's refunds, for the refunds page and the refunds in the purchases' timelines.
    public init(
        configuration: ConsoleConfiguration, reader: any HistoryLedger, gamebase: (any GamebaseAPI)?,
        status: any WorkerStatusSource, reconcileGrace: Duration? = nil, records: (any DeadLetterRecordSource)? = nil,
        refunds: (any RefundHistoryLedger)? = nil, logger: Logger
    ) {
        self.configuration = configuration
        let history = OutcomeHistory(start: ConsoleSite.counts(status.workerStatus()))
        site = ConsoleSite(
            configuration: configuration, reader: reader, gamebase: gamebase, status: status,
            reconcileGrace: reconcileGrace, history: history, records: records, refunds: refunds)
        self.logger = logger
    }

    /// The port actually bound, once listening.
    public var listeningPort: Int? { boundPort.withLock { $0 } }

    public func run() async throws {
        guard configuration.isEnabled else { return }
        try configuration.validate()
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { [site] in
                // The windows' samples: counts the metrics keep anyway, read every interval.
                while !Task.isCancelled {
                    do { try await Task.sleep(for: site.history.interval) } catch { return }
                    site.history.record(ConsoleSite.counts(site.status.workerStatus()))
                }
            }
            tasks.addTask { [self] in try await serve() }
            try await tasks.next()
            tasks.cancelAll()
        }
    }

    private func serve() async throws {
        let router = Router(options: .autoGenerateHeadEndpoints)
        router.add(middleware: ConsoleGuard(access: configuration.access, site: site))
        let site = site
        router.get("/") { request, _ in Self.response(await site.overview(), for: request) }
        // The pages of `find`: any id, a paymentSeq, a userId (the search box trims what was typed).
        let finds: [(path: String, parameter: String, kind: IdentifierKind?, title: String, current: String)] = [
            ("/search", "q", nil, "Search", "/search"), ("/purchase", "seq", .paymentSeq, "Purchase", ""),
            ("/user", "id", .userId, "User's purchases", ""),
        ]
        for find in finds {
            router.get(RouterPath(find.path)) { request, _ in
                let query = request.uri.queryParameters
                // What was typed is trimmed; the ids of the console's own links are taken byte for byte.
                let given = query.get(find.parameter)
                let id = find.kind == nil ? given.map { $0.trimmingCharacters(in: .whitespacesAndNewlines) } : given
                return Self.response(
                    await site.find(
                        id, as: find.kind, before: find.kind == .paymentSeq ? nil : query.get("before"),
                        askGamebase: query.get("gamebase") == "1" && Self.isSameSite(request), path: find.path,
                        title: find.title, current: find.current,
                        // Links of the page (ask Gamebase, the next page) keep where it stands.
                        parameters: [(find.parameter, id ?? "")] + (query.get("before").map { [("before", $0)] } ?? [])),
                    for: request)
            }
        }
        router.get("/dead-letters") { request, _ in
            let query = request.uri.queryParameters
            return Self.response(
                await site.deadLetters(reason: query.get("reason"), before: query.get("before")), for: request)
        }
        router.get("/refunds") { request, _ in Self.response(await site.refundsPage(), for: request) }
        router.get("/dead-letters/record") { request, _ in
            let query = request.uri.queryParameters
            // Each read opens a Kafka reader: another site's page must not be able to make a browser ask for them.
            guard Self.isSameSite(request) else {
                return Self.response(
                    site.problem(403, "a record's value is opened from the console's own pages"), for: request)
            }
            return Self.response(
                await site.record(partition: query.get("partition"), offset: query.get("offset")), for: request)
        }
        router.get("/console.css") { _, _ in
            Response(
                status: .ok, headers: [.contentType: "text/css; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(string: ConsoleStyle.css)))
        }
        router.get("/favicon.ico") { _, _ in
            Response(
                status: .ok, headers: [.contentType: "image/svg+xml"],
                body: .init(byteBuffer: ByteBuffer(string: ConsoleStyle.icon)))
        }
        var quiet = logger
        quiet.logLevel = max(logger.logLevel, .warning)
        let app = Application(
            router: router,
            // An idle connection is closed after 30 s: a client that opens many and sends nothing holds no descriptor
            // the worker's Kafka, ledger and Gamebase connections need.
            server: .http1(configuration: .init(idleTimeout: .seconds(30))),
            configuration: .init(address: .hostname(configuration.address, port: configuration.port), serverName: nil),
            onServerRunning: { [self] channel in
                let port = channel.localAddress?.port
                boundPort.withLock { $0 = port }
                logger.info(
                    "console listening",
                    metadata: [
                        "console.address": "\(configuration.address)", "console.port": "\(port ?? -1)",
                        "console.token": "\(configuration.access.requiresToken ? "required" : "none (loopback)")",
                    ])
            }, logger: quiet)
        do {
            try await app.run()
        } catch is CancellationError {
            return
        } catch {
            // The console is for people; purchases go on without it.
            logger.error(
                listeningPort == nil
                    ? "the console could not listen; the worker runs without it"
                    : "the console stopped; the worker runs without it",
                metadata: [
                    "console.address": "\(configuration.address)", "console.port": "\(configuration.port)",
                    "error": "\(error)",
                ])
            try? await gracefulShutdown()
        }
    }

    /// The reply as JSON when the client asks for it first (`Accept: application/json`), HTML otherwise.
    static func response(_ reply: ConsoleReply, for request: Request) -> Response {
        let status = HTTPResponse.Status(code: reply.status)
        if wantsJSON(request.headers[.accept]) {
            return Response(
                status: status, headers: [.contentType: "application/json"],
                body: .init(byteBuffer: ByteBuffer(bytes: reply.json)))
        }
        return Response(
            status: status, headers: [.contentType: "text/html; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(string: reply.html)))
    }

    /// Whether a browser says the request comes from the console's own pages (or was typed): asking Gamebase is a GET
    /// with a cost, which another site's page must not be able to make a browser send. Clients that are no browser
    /// send no `Sec-Fetch-Site`.
    static func isSameSite(_ request: Request) -> Bool {
        guard let site = request.headers[HTTPField.Name("Sec-Fetch-Site")!]?.lowercased() else { return true }
        return site == "same-origin" || site == "none"
    }

    /// JSON when `application/json` comes before `text/html` in `Accept` (or is there without it).
    static func wantsJSON(_ accept: String?) -> Bool {
        guard let accept = accept?.lowercased() else { return false }
        guard let json = accept.range(of: "application/json") else { return false }
        guard let html = accept.range(of: "text/html") else { return true }
        return json.lowerBound < html.lowerBound
    }
}
