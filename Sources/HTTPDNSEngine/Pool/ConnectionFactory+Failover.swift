// The executor of ConnectFailover's rules (see that file): attempts, the attempt delay, and the source's
// answers run as tasks that report to one loop, which feeds the machine and carries out what it says.
// The connect waits for no attempt but the winner: one that connects after another has won is closed.

import HTTPDNSCore
import NIOConcurrencyHelpers
import NIOCore

extension ConnectionFactory {
    /// The attempt delay (RFC 8305's): a remembered address that has not connected by then starts the
    /// lookup past the cache; under fast open, the next address starts.
    static let attemptDelay = Duration.milliseconds(250)

    /// What the loop hears from its tasks.
    private enum Report: Sendable {
        case event(ConnectFailover.Event)
        /// The lookup past the cache (`fresh`) or the fallback answered; nil: nothing, or it failed.
        case answer(fresh: Bool, ResolvedAddresses?)
    }

    /// What the attempts leave behind: connections that came up, errors, and whether the race is over.
    private struct Outcomes {
        var connections: [ConnectFailover.AttemptID: Connection] = [:]
        var errors: [any Error] = []
        var over = false
    }

    /// A connection to `addresses`, which `source` gave for the recipe's host, trying again past the
    /// cache and then the fallback when they fail or stay silent (ConnectFailover.swift). Throws the
    /// engine's error, with every attempt's failure.
    func connectFailingOver(
        _ recipe: ConnectRecipe,
        addresses: ResolvedAddresses,
        source: any AddressSource,
        lookup: AddressLookup,
        deadline: NIODeadline?,
        port: Int? = nil
    ) async throws -> Connection {
        let host = recipe.url.host
        var machine = ConnectFailover(
            addresses: addresses.connectOrder,
            options: ConnectFailover.Options(
                remembered: addresses.remembered,
                mayFallBack: true,
                fastOpen: configuration.network.tcpFastOpen
            )
        )
        let (reports, sink) = AsyncStream.makeStream(of: Report.self)
        let outcomes = NIOLockedValueBox(Outcomes())
        // Every address heard of so far, and who gave the ones that came later.
        var known = addresses
        var givenBy: [IPAddress: ResolutionSource] = [:]
        var timer: Task<Void, Never>?
        // What the trace shows of each re-ask: the addresses failed when it was asked, and when.
        var failedSoFar: [String] = []
        var asked: [Bool: (at: ContinuousClock.Instant, failed: [String])] = [:]
        var reasks: [AddressReask] = []
        defer {
            timer?.cancel()
            sink.finish()
        }
        var actions = machine.start()
        var iterator = reports.makeAsyncIterator()
        while true {
            for action in actions {
                switch action {
                case .attempt(let id, let ips):
                    var own = lookup
                    if let first = ips.first, let later = givenBy[first] { own.source = later }
                    let part = known.restricted(to: ips)
                    Task {
                        do {
                            let connection = try await self.connect(
                                recipe,
                                addresses: part,
                                lookup: own,
                                deadline: deadline,
                                port: port
                            )
                            let late = outcomes.withLockedValue { o -> Bool in
                                if !o.over { o.connections[id] = connection }
                                return o.over
                            }
                            if late {
                                connection.channel.close(promise: nil)
                            } else {
                                sink.yield(.event(.attemptSucceeded(id)))
                            }
                        } catch {
                            outcomes.withLockedValue { $0.errors.append(error) }
                            let offline = (error as? HTTPEngineError)?.networkUnavailable != nil
                            sink.yield(.event(offline ? .attemptFoundNoNetwork(id) : .attemptFailed(id)))
                        }
                    }
                case .scheduleAttemptDelay:
                    timer?.cancel()
                    timer = Task {
                        guard (try? await Task.sleep(for: Self.attemptDelay)) != nil else { return }
                        sink.yield(.event(.attemptDelayPassed))
                    }
                case .forget(let ips):
                    // The cache holds what the source gave: a NAT64 form's own IPv4 address.
                    let given = ips.map { known.synthesized[$0] ?? $0 }
                    failedSoFar += given.map(\.description)
                    source.forget(given, of: host)
                case .askFresh:
                    asked[true] = (.now, failedSoFar)
                    Task {
                        sink.yield(
                            .answer(fresh: true, try? await source.freshAddresses(for: host, deadline: deadline))
                        )
                    }
                case .askFallback:
                    asked[false] = (.now, failedSoFar)
                    Task {
                        sink.yield(
                            .answer(fresh: false, try? await source.fallbackAddresses(for: host, deadline: deadline))
                        )
                    }
                case .succeed(let id):
                    let (winner, others) = outcomes.withLockedValue { o in
                        o.over = true
                        let winner = o.connections.removeValue(forKey: id)
                        defer { o.connections = [:] }
                        return (winner, Array(o.connections.values))
                    }
                    for other in others { other.channel.close(promise: nil) }
                    // The machine names only an attempt that reported its connection.
                    winner!.noteReasks(reasks)
                    return winner!
                case .fail:
                    throw Self.merged(outcomes.withLockedValue { $0.errors }, host: host)
                case .discard(let id):
                    let late = outcomes.withLockedValue { $0.connections.removeValue(forKey: id) }
                    late?.channel.close(promise: nil)
                }
            }
            // The reports never finish before the loop returns (the sink is finished on the way out).
            guard let report = await iterator.next() else {
                throw HTTPEngineError(.connectFailed, "the connect to \(host) was abandoned")
            }
            switch report {
            case .event(let event):
                actions = machine.event(event)
            case .answer(let fresh, let found):
                if let ask = asked[fresh] {
                    reasks.append(
                        AddressReask(
                            kind: fresh ? .pastCache : .fallback,
                            failed: ask.failed,
                            source: found?.source,
                            duration: .now - ask.at
                        )
                    )
                }
                var ips: [IPAddress] = []
                if let found {
                    let usable = await prepared(found, host: host)
                    for ip in usable.connectOrder where givenBy[ip] == nil { givenBy[ip] = found.source }
                    known = known.adding(usable)
                    ips = usable.connectOrder
                }
                actions = machine.event(fresh ? .freshAnswer(ips) : .fallbackAnswer(ips))
            }
        }
    }

    /// `first`'s connection, or `second`'s: `second` starts once `first` has failed or has not connected
    /// within `delay`; the first to connect wins and a later one is closed. Throws `second`'s error when
    /// both fail (`first`'s if `second` never ran).
    static func race(
        after delay: Duration,
        _ first: @escaping @Sendable () async throws -> Connection,
        or second: @escaping @Sendable () async throws -> Connection
    ) async throws -> Connection {
        try await race(after: delay, first, or: second) { $0.channel.close(promise: nil) }
    }

    /// `race(after:_:or:)` for any value; `discard` disposes of a value that came after the winner.
    static func race<T: Sendable>(
        after delay: Duration,
        _ first: @escaping @Sendable () async throws -> T,
        or second: @escaping @Sendable () async throws -> T,
        discard: @escaping @Sendable (T) -> Void
    ) async throws -> T {
        let (reports, sink) = AsyncStream.makeStream(of: RaceReport.self)
        // Values that came, by runner, until the race is over; after it, a value is discarded at once.
        let outcomes = NIOLockedValueBox((values: [Int: T](), over: false))
        @Sendable func start(_ index: Int, _ body: @escaping @Sendable () async throws -> T) {
            Task {
                do {
                    let value = try await body()
                    let late = outcomes.withLockedValue { o -> Bool in
                        if !o.over { o.values[index] = value }
                        return o.over
                    }
                    if late { discard(value) } else { sink.yield(.connected(index)) }
                } catch {
                    sink.yield(.failed(index, error))
                }
            }
        }
        start(0, first)
        let timer = Task {
            guard (try? await Task.sleep(for: delay)) != nil else { return }
            sink.yield(.delayPassed)
        }
        defer {
            timer.cancel()
            sink.finish()
        }
        var secondStarted = false
        var errors: [Int: any Error] = [:]
        for await report in reports {
            switch report {
            case .delayPassed, .failed(0, _):
                if case .failed(_, let error) = report { errors[0] = error }
                if !secondStarted {
                    secondStarted = true
                    start(1, second)
                }
            case .failed(let index, let error):
                errors[index] = error
            case .connected(let index):
                let (winner, others) = outcomes.withLockedValue { o in
                    o.over = true
                    let winner = o.values.removeValue(forKey: index)
                    defer { o.values = [:] }
                    return (winner, Array(o.values.values))
                }
                others.forEach(discard)
                // Only a runner that stored its value reports `connected`.
                return winner!
            }
            if errors.count == 2 { throw errors[1]! }
        }
        throw errors[1] ?? errors[0] ?? HTTPEngineError(.connectFailed, "the connect was abandoned")
    }

    /// What `race`'s loop hears from its runners and its timer.
    private enum RaceReport: Sendable {
        case delayPassed
        case connected(Int)
        case failed(Int, any Error)
    }

    /// Every attempt's failure as one error: the first one's code and message, every attempt listed.
    private static func merged(_ errors: [any Error], host: String) -> any Error {
        let engineErrors = errors.compactMap { $0 as? HTTPEngineError }
        guard let first = engineErrors.first else {
            return errors.first ?? HTTPEngineError(.noAddresses, "no address to connect to for \(host)")
        }
        guard engineErrors.count > 1 else { return first }
        return HTTPEngineError(
            first.code,
            first.message,
            attempts: engineErrors.flatMap(\.attempts),
            underlying: first.underlying
        )
    }
}
