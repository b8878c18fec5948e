// How the answers for a name's address families combine into the outcome of one lookup.
//
// A lookup asks A and AAAA. When neither gives an address, what the asker is told depends on why:
// - every family asked *answered* without an address (NXDOMAIN or NODATA): the name has no address;
// - a family *failed* (a timeout, a broken answer, SERVFAIL from the upstream): the lookup failed, and
//   the name is never reported absent because one answer could not be read. This is what a recursive
//   resolver does (unbound and kresd answer SERVFAIL, not NXDOMAIN, when a lookup fails), and what
//   `httpdns serve` answers its clients: an NXDOMAIN there is cached by them as "this name does not exist".

import HTTPDNSCore

/// What one family's lookup gave.
enum FamilyOutcome: Sendable, Hashable {
    /// One address or more.
    case addresses
    /// An answer without an address: NODATA, or NXDOMAIN.
    case noAddress
    /// No answer to read: an error, a timeout, a malformed answer, SERVFAIL or REFUSED.
    case failed
}

/// The outcome of a lookup of several families, from each family's (`FamilyOutcome.combine`).
enum LookupOutcome: Sendable, Hashable {
    /// At least one family gave addresses: they are the answer, whatever the other family did.
    case addresses
    /// Every family asked answered without an address.
    case noAddress
    /// No family gave an address and at least one failed.
    case failed
}

extension FamilyOutcome {
    /// Combines the outcomes of the families asked (one or two).
    static func combine(_ families: [FamilyOutcome]) -> LookupOutcome {
        if families.contains(.addresses) { return .addresses }
        if families.contains(.failed) { return .failed }
        return .noAddress
    }
}
