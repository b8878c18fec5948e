// The operating system's resolver (getaddrinfo), run on NIO's blocking thread pool so no event loop
// and no Swift concurrency thread is ever blocked. It reports no TTL.

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif
import HTTPDNSCore
import NIOCore
import NIOPosix

struct SystemProvider: DNSProvider {
    var name: String { "system" }
    let pool: NIOThreadPool

    init(threadPool: NIOThreadPool = .singleton) {
        self.pool = threadPool
    }

    func resolve(_ name: String, family: AddressFamily, deadline: NIODeadline) async throws -> FamilyAnswer {
        // getaddrinfo cannot be cancelled; the deadline bounds how long we wait for it, not the call itself.
        let eventLoop = MultiThreadedEventLoopGroup.singleton.next()
        let promise = eventLoop.makePromise(of: FamilyAnswer.self)
        pool.runIfActive(eventLoop: eventLoop) { try Self.lookup(name, family: family) }.cascade(to: promise)
        let timeout = eventLoop.scheduleTask(deadline: deadline) {
            promise.fail(ProviderError("no answer before the timeout"))
        }
        defer { timeout.cancel() }
        return try await promise.futureResult.get()
    }

    static func lookup(_ name: String, family: AddressFamily) throws -> FamilyAnswer {
        var hints = addrinfo()
        hints.ai_family = family == .ipv4 ? AF_INET : AF_INET6
        #if canImport(Darwin)
            hints.ai_socktype = SOCK_STREAM
        #else
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #endif
        var result: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(name, nil, &hints, &result)
        defer { if let result { freeaddrinfo(result) } }
        if rc == EAI_NONAME || rc == eaiNoData || rc == eaiAddressFamily {
            return .empty
        }
        guard rc == 0 else {
            throw ProviderError("getaddrinfo failed: \(String(cString: gai_strerror(rc)))")
        }
        var addresses = AddressCollector()
        var cursor = result
        while let info = cursor {
            if let sa = info.pointee.ai_addr {
                let ip: IPAddress?
                if info.pointee.ai_family == AF_INET {
                    ip = sa.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { p in
                        withUnsafeBytes(of: p.pointee.sin_addr) { IPAddress(bytes: $0) }
                    }
                } else {
                    ip = sa.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { p in
                        withUnsafeBytes(of: p.pointee.sin6_addr) { IPAddress(bytes: $0) }
                    }
                }
                if let ip { addresses.add(ip) }
            }
            cursor = info.pointee.ai_next
        }
        return FamilyAnswer(addresses: addresses.addresses, ttl: nil)
    }
}

// "No such address" codes. glibc only exports EAI_NODATA / EAI_ADDRFAMILY with _GNU_SOURCE, so they
// are spelled out here (values from glibc's netdb.h).
#if canImport(Darwin)
    private let eaiNoData = EAI_NODATA
    private let eaiAddressFamily = EAI_ADDRFAMILY
#else
    private let eaiNoData: Int32 = -5
    private let eaiAddressFamily: Int32 = -9
#endif
