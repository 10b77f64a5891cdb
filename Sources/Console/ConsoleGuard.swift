import Foundation
import HTTPTypes
import Hummingbird

/// In front of every page: only GET and HEAD (405 otherwise: the console changes nothing), the token when one is
/// required (401 and no data without it), only requests addressed to this host when it is open on loopback (a
/// malicious web page that rebinds its own name to 127.0.0.1 gets 403, not the console), and the headers that keep
/// its pages out of frames, scripts and referrers on every response, errors included.
struct ConsoleGuard<Context: RequestContext>: RouterMiddleware {
    let access: ConsoleAccess
    let site: ConsoleSite

    static var securityHeaders: HTTPFields {
        [
            .contentSecurityPolicy:
                "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; "
                + "base-uri 'none'",
            HTTPField.Name("X-Frame-Options")!: "DENY",
            HTTPField.Name("Referrer-Policy")!: "no-referrer",
            .xContentTypeOptions: "nosniff",
            .cacheControl: "no-store",
            HTTPField.Name("Cross-Origin-Opener-Policy")!: "same-origin",
            HTTPField.Name("Cross-Origin-Resource-Policy")!: "same-origin",
        ]
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        var response: Response
        if request.method != .get, request.method != .head {
            response = ConsoleServer.response(
                site.refusal(405, "the console is read-only: \(request.method.rawValue) is refused"), for: request)
            response.headers[.allow] = "GET, HEAD"
        } else if !access.requiresToken, !Self.isLoopbackAuthority(request.head.authority) {
            response = ConsoleServer.response(
                site.refusal(403, "this console answers requests addressed to localhost only"), for: request)
        } else if !access.allows(authorization: request.headers[.authorization]) {
            response = ConsoleServer.response(
                site.refusal(401, "a bearer token is required (console.token_file)"), for: request)
            response.headers[.wwwAuthenticate] = "Basic realm=\"iap-worker console\", charset=\"UTF-8\""
        } else {
            do {
                response = try await next(request, context)
            } catch let error as HTTPError {
                let status = Int(error.status.code)
                response = ConsoleServer.response(
                    site.problem(status, status == 404 ? "no such page" : error.status.reasonPhrase), for: request)
            } catch {
                response = ConsoleServer.response(site.problem(500, "the page failed"), for: request)
            }
        }
        for field in Self.securityHeaders { response.headers[field.name] = field.value }
        return response
    }

    /// `localhost`, `127.x.y.z` or `[::1]`, with or without a port; no Host at all is taken as local (HTTP/1.0).
    static func isLoopbackAuthority(_ authority: String?) -> Bool {
        guard let authority, !authority.isEmpty else { return true }
        var host = authority.lowercased()
        if host.hasPrefix("[") {
            guard let end = host.firstIndex(of: "]") else { return false }
            host = String(host[host.index(after: host.startIndex)..<end])
        } else if let colon = host.lastIndex(of: ":") {
            host = String(host[..<colon])
        }
        return ConsoleConfiguration.isLoopback(host)
    }
}
