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

    /// What a race's runners leave behind: the values that came, by runner, until the race is over (a
    /// value after it is the runner's to dispose of), and the errors. Thread-safe.
    private final class Finishers<T: Sendable>: Sendable {
        private let state = NIOLockedValueBox((values: [Int: T](), errors: [any Error](), over: false))

        /// Keeps `value` from runner `id`; false when the race is over (dispose of it).
        func keep(_ value: T, from id: Int) -> Bool {
            state.withLockedValue { s in
                if !s.over { s.values[id] = value }
                return !s.over
            }
        }

        func failed(_ error: any Error) { state.withLockedValue { $0.errors.append(error) } }

        var errors: [any Error] { state.withLockedValue { $0.errors } }

        /// Ends the race: runner `id`'s value, and the others' that came, to dispose of.
        func finish(with id: Int) -> (winner: T?, others: [T]) {
            state.withLockedValue { s in
                s.over = true
                let winner = s.values.removeValue(forKey: id)
                defer { s.values = [:] }
                return (winner, Array(s.values.values))
            }
        }

        /// Runner `id`'s value, taken out (one that came after the winner, to dispose of).
        func take(_ id: Int) -> T? { state.withLockedValue { $0.values.removeValue(forKey: id) } }
    }

    /// A connection to `addresses`, which `source` gave for the job's host, trying again past the
    /// cache and then the fallback when they fail or stay silent (ConnectFailover.swift). Throws the
    /// engine's error, with every attempt's failure.
    func connectFailingOver(
        _ job: ConnectJob,
        addresses: ResolvedAddresses,
        source: any AddressSource,
        lookup: AddressLookup,
        deadline: NIODeadline?,
        port: Int? = nil
    ) async throws -> Connection {
        let host = job.profile.origin.host
        var machine = ConnectFailover(
            addresses: addresses.connectOrder,
            options: ConnectFailover.Options(
                remembered: addresses.remembered,
                mayFallBack: true,
                fastOpen: configuration.network.tcpFastOpen
            )
        )
        let (reports, sink) = AsyncStream.makeStream(of: Report.self)
        let outcomes = Finishers<Connection>()
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
                                job,
                                addresses: part,
                                lookup: own,
                                deadline: deadline,
                                port: port
                            )
                            if outcomes.keep(connection, from: id) {
                                sink.yield(.event(.attemptSucceeded(id)))
                            } else {
                                connection.channel.close(promise: nil)
                            }
                        } catch {
                            outcomes.failed(error)
                            sink.yield(.event(Self.event(attempt: id, failedWith: error)))
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
                case .askFresh, .askFallback:
                    let fresh = action == .askFresh
                    asked[fresh] = (.now, failedSoFar)
                    Task {
                        // A lookup that fails brings nothing; its error joins the connect's, should no
                        // attempt have one to report.
                        do {
                            let found =
                                fresh
                                ? try await source.freshAddresses(for: host, deadline: deadline)
                                : try await source.fallbackAddresses(for: host, deadline: deadline)
                            sink.yield(.answer(fresh: fresh, found))
                        } catch {
                            outcomes.failed(error)
                            sink.yield(.answer(fresh: fresh, nil))
                        }
                    }
                case .succeed(let id):
                    let (winner, others) = outcomes.finish(with: id)
                    for other in others { other.channel.close(promise: nil) }
                    // The machine names only an attempt that reported its connection.
                    winner!.noteReasks(reasks)
                    return winner!
                case .fail:
                    throw Self.merged(outcomes.errors, host: host)
                case .discard(let id):
                    outcomes.take(id)?.channel.close(promise: nil)
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
                    ips = usable.connectOrder
                    for ip in ips where givenBy[ip] == nil { givenBy[ip] = found.source }
                    known = known.adding(usable)
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
        let outcomes = Finishers<T>()
        @Sendable func start(_ index: Int, _ body: @escaping @Sendable () async throws -> T) {
            Task {
                do {
                    let value = try await body()
                    if outcomes.keep(value, from: index) { sink.yield(.connected(index)) } else { discard(value) }
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
                let (winner, others) = outcomes.finish(with: index)
                others.forEach(discard)
                // Only a runner that stored its value reports `connected`.
                return winner!
            }
            if errors.count == 2 { throw errors[1]! }
        }
        throw errors[1] ?? errors[0] ?? HTTPEngineError(.connectFailed, "the connect was abandoned")
    }

    /// What an attempt's failure tells the failover: no network, a dead address (it did not connect), or
    /// an address that answered and was rejected after (TLS, the certificate, the request's deadline).
    static func event(attempt id: ConnectFailover.AttemptID, failedWith error: any Error) -> ConnectFailover.Event {
        guard let error = error as? HTTPEngineError else { return .attemptRejected(id) }
        if error.networkUnavailable != nil { return .attemptFoundNoNetwork(id) }
        switch error.code {
        case .connectFailed, .connectTimeout: return .attemptFailed(id)
        default: return .attemptRejected(id)
        }
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
