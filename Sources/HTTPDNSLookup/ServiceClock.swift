// A signing service's clock as the device sees it. A phone whose clock is hours off signs
// Alibaba queries that the service finds expired (or too far ahead) every time; the vendors' SDKs correct
// the signing time from the service's. So do we: every answer's `Date` header (RFC 9110 §6.6.1: an origin
// server with a clock sends one) gives the service's time, the offset is kept per service (a provider)
// until the network changes, and a query refused as expired or badly signed is sent once more when its
// refusal taught us a new offset. Offsets under `tolerance` are noise (Date has one-second resolution,
// and transit takes time) and count as none.

import Foundation
import NIOConcurrencyHelpers

/// The offset between the device's clock and one service's, learnt from the service's `Date`.
package final class ServiceClock: Sendable {
    /// Differences smaller than this are not corrected.
    static let tolerance = 30

    private let offset = NIOLockedValueBox(0)
    private let localNow: @Sendable () -> Int

    /// `localNow`: the device's Unix seconds (tests move it).
    init(localNow: @escaping @Sendable () -> Int = { Int(Date().timeIntervalSince1970) }) {
        self.localNow = localNow
    }

    /// The service's Unix seconds now, as best known.
    func now() -> Int { localNow() + offset.withLockedValue { $0 } }

    /// The offset now in use (0: none).
    var currentOffset: Int { offset.withLockedValue { $0 } }

    /// Takes the service's `Date` header value; returns whether the offset changed. A value that does
    /// not parse changes nothing.
    @discardableResult
    func learn(dateHeader: String) -> Bool {
        guard let served = Self.parseHTTPDate(dateHeader) else { return false }
        let learnt = Self.offset(served: served, local: localNow())
        return offset.withLockedValue { current in
            guard current != learnt else { return false }
            current = learnt
            return true
        }
    }

    /// The network changed: the next network's path to the service may differ (another region, a
    /// captive portal answering for it); start again from the device's clock.
    func reset() { offset.withLockedValue { $0 = 0 } }

    /// The correction for a service that says it is `served` when the device says `local`: zero within
    /// the tolerance.
    static func offset(served: Int, local: Int) -> Int {
        let difference = served - local
        return abs(difference) < tolerance ? 0 : difference
    }

    /// Unix seconds of an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`, RFC 9110 §5.6.7), the only form
    /// a server may send; nil for anything else.
    static func parseHTTPDate(_ text: String) -> Int? {
        guard text.hasSuffix(" GMT"), text.utf8.count == 29 else { return nil }
        return imfFixdate.withLockedValue { $0.date(from: text) }.map { Int($0.timeIntervalSince1970) }
    }

    /// `unixSeconds` as an IMF-fixdate, for a server's `Date` header.
    package static func httpDate(_ unixSeconds: Int) -> String {
        imfFixdate.withLockedValue { $0.string(from: Date(timeIntervalSince1970: TimeInterval(unixSeconds))) }
    }

    /// Foundation's formatter for the one date form HTTP servers send; not Sendable, so used under a lock.
    private static let imfFixdate: NIOLockedValueBox<DateFormatter> = {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return NIOLockedValueBox(formatter)
    }()
}
