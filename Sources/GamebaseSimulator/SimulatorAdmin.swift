import Foundation
import Hummingbird
import NIOCore
import NIOFoundationCompat
import Wire

/// The simulator's own endpoints (not part of Gamebase):
/// - `POST /admin/payments`: a JSON array of payments to add;
/// - `GET /admin/counters`: calls per API, successful consumes per paymentSeq and when each was first consumed
///   (`consumedAt`), and List Consumables calls per userId with when they came (`listTimes`); times in epoch
///   milliseconds;
/// - `GET /admin/faults`, `POST /admin/faults`: read or change fault injection.
struct SimulatorAdmin {
    let state: SimulatorState

    struct Counters: Codable {
        var calls: [String: Int]
        var consumes: [String: Int]
        var lists: [String: Int]
        var listTimes: [String: [Int64]]
        var consumedAt: [String: Int64]
    }

    func respond(to request: Request, path: String) async throws -> Response {
        switch (request.method, path) {
        case (.post, "/admin/payments"):
            let body = try await request.body.collect(upTo: 256 << 20)
            do {
                let payments = try JSONDecoder().decode([SimulatedPayment].self, from: Data(body.readableBytesView))
                state.add(payments)
                return json(["added": payments.count])
            } catch {
                return Response(
                    status: .badRequest, body: .init(byteBuffer: ByteBuffer(string: "invalid payments: \(error)")))
            }
        case (.get, "/admin/counters"):
            return json(
                Counters(
                    calls: state.calls, consumes: state.consumes, lists: state.listsByUser,
                    listTimes: state.listTimesByUser.mapValues { $0.map(Self.epochMilliseconds) },
                    consumedAt: state.firstConsumedAt.mapValues(Self.epochMilliseconds)))
        case (.get, "/admin/faults"):
            return json(state.faults)
        case (.post, "/admin/faults"):
            let body = try await request.body.collect(upTo: 1 << 16)
            guard let faults = try? JSONDecoder().decode(SimulatorFaults.self, from: Data(body.readableBytesView))
            else {
                return Response(status: .badRequest, body: .init(byteBuffer: ByteBuffer(string: "invalid faults")))
            }
            state.faults = faults
            return json(faults)
        default:
            return Response(status: .notFound)
        }
    }

    static func epochMilliseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded()) }

    private func json(_ value: some Encodable) -> Response {
        let data = (try? JSONEncoder().encode(value)) ?? Data()
        return Response(
            status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(data: data)))
    }
}
