// What the user can do about an error, in this tool's own flags. The libraries' messages say only what
// happened; the advice is chosen here from error codes (never from message text) and appended when the
// error is printed.

import Foundation
import HTTPDNSCommandLine
import HTTPDNSCore
import HTTPDNSEngine
import HTTPDNSLookup

extension ResolverOptions {
    /// Text to append to `error`'s message (starting with a space), or nil when there is no advice.
    func advice(for error: any Error) -> String? {
        if Self.involves(error, where: { ($0 as? HTTPEngineError)?.code == .untrustedCertificate })
            || (error as? URLError)?.code == .serverCertificateUntrusted
        {
            return " (here: pass that CA with --cacert)"
        }
        if resolvers.isEmpty,
            Self.involves(error, where: { ($0 as? ResolverError)?.code == .allProvidersFailed })
        {
            return " (add one with --resolver)"
        }
        return nil
    }

    /// Whether `error`, or an error it carries (an engine error's underlying error, a resolver error's
    /// provider failures), matches.
    static func involves(_ error: any Error, where matches: (any Error) -> Bool, depth: Int = 0) -> Bool {
        guard depth < 8 else { return false }
        if matches(error) { return true }
        if let e = error as? HTTPEngineError, let underlying = e.underlying {
            return involves(underlying, where: matches, depth: depth + 1)
        }
        if let e = error as? ResolverError {
            return e.failures.contains { involves($0.error, where: matches, depth: depth + 1) }
        }
        return false
    }
}
