// The accepted connections of a listener, at most `limit` of them. Shared by the project's two
// listeners (HTTPDNSServer's HTTPListener and HTTPDNSProxy); it lives here because both build on this
// module.

import NIOConcurrencyHelpers
import NIOCore

/// Admits accepted channels up to a limit, forgets each when it closes, and closes them all on stop.
package final class ConnectionLimiter: Sendable {
    package let limit: Int
    private let open = NIOLockedValueBox<[ObjectIdentifier: any Channel]>([:])

    package init(limit: Int) { self.limit = limit }

    /// Takes `channel` in if there is room (it is forgotten when it closes); false when the limit is
    /// reached, and the caller closes it.
    package func admit(_ channel: any Channel) -> Bool {
        let id = ObjectIdentifier(channel)
        let admitted = open.withLockedValue { open -> Bool in
            guard open.count < limit else { return false }
            open[id] = channel
            return true
        }
        if admitted {
            channel.closeFuture.whenComplete { _ in _ = self.open.withLockedValue { $0.removeValue(forKey: id) } }
        }
        return admitted
    }

    /// Connections open now.
    package var count: Int { open.withLockedValue { $0.count } }

    /// The connections open now.
    package var channels: [any Channel] { open.withLockedValue { Array($0.values) } }

    /// Closes every open connection.
    package func closeAll() async {
        for channel in channels { try? await channel.close() }
    }
}
