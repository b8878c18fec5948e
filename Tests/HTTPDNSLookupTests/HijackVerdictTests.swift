// The hijack verdict's rule, one case per row of the table in docs/CLI.md, without resolvers.

import Testing
@testable import HTTPDNSCore
@testable import HTTPDNSLookup

@Suite struct HijackVerdictTests {
    let publicA = IPAddress("93.184.216.34")!
    let publicB = IPAddress("93.184.216.35")!
    let edge = IPAddress("2606:2800:220:1::1")!

    func judge(_ httpdns: HijackVerdict.Answer, _ local: HijackVerdict.Answer) -> HijackVerdict {
        HijackVerdict.judge(httpdns: httpdns, localDNS: local)
    }

    @Test func anAddressInCommonIsConsistent() {
        #expect(judge(.addresses([publicA, edge]), .addresses([publicA])) == .consistent)
        #expect(judge(.addresses([publicA]), .addresses([publicB, publicA])) == .consistent)
    }

    @Test func otherAddressesAreHijacked() {
        #expect(judge(.addresses([publicA]), .addresses([publicB])) == .hijacked)
    }

    @Test func aPrivateOrReservedAddressNextToTheRealOneIsHijacked() {
        for reserved in ["127.0.0.1", "10.1.2.3", "0.0.0.0", "192.168.1.1", "::1"] {
            #expect(
                judge(.addresses([publicA]), .addresses([publicA, IPAddress(reserved)!])) == .hijacked,
                "\(reserved)"
            )
        }
    }

    @Test func privateAnswersOnBothSidesAreJudgedByOverlapAlone() {
        // A private name (or a test network) that HTTPDNS itself answers with loopback.
        let loopback = IPAddress("127.0.0.1")!
        #expect(judge(.addresses([loopback]), .addresses([loopback])) == .consistent)
        #expect(judge(.addresses([loopback]), .addresses([IPAddress("127.0.0.66")!])) == .hijacked)
    }

    @Test func noAddressFromLocalDNSWhileHTTPDNSHasOneIsBlocked() {
        #expect(judge(.addresses([publicA]), .none) == .blocked)
        #expect(judge(.addresses([publicA]), .failed) == .blocked)
        #expect(judge(.addresses([publicA]), .addresses([])) == .blocked)
    }

    @Test func addressesForANameHTTPDNSSaysHasNoneAreHijacked() {
        #expect(judge(.none, .addresses([publicA])) == .hijacked)
        #expect(judge(.addresses([]), .addresses([publicA])) == .hijacked)
    }

    @Test func neitherHavingAnAddressIsConsistent() {
        #expect(judge(.none, .none) == .consistent)
        #expect(judge(.none, .failed) == .consistent)
    }

    @Test func withoutAnHTTPDNSAnswerNothingIsVerified() {
        #expect(judge(.failed, .addresses([publicA])) == .unverified)
        #expect(judge(.failed, .none) == .unverified)
        #expect(judge(.failed, .failed) == .unverified)
    }

    @Test func onlyHijackedAndBlockedMeanDoNotTrustLocalDNS() {
        #expect(HijackVerdict.allCasesForTests.filter(\.isHijack) == [.hijacked, .blocked])
        #expect(
            HijackVerdict.allCasesForTests.map(\.description) == ["consistent", "hijacked", "blocked", "unverified"]
        )
    }
}

extension HijackVerdict {
    static let allCasesForTests: [HijackVerdict] = [.consistent, .hijacked, .blocked, .unverified]
}

/// How families' outcomes combine (FamilyOutcomes.swift): "no address" only when every family answered.
@Suite struct FamilyOutcomeTests {
    @Test func addressesFromAnyFamilyAreTheAnswer() {
        #expect(FamilyOutcome.combine([.addresses, .failed]) == .addresses)
        #expect(FamilyOutcome.combine([.noAddress, .addresses]) == .addresses)
        #expect(FamilyOutcome.combine([.addresses]) == .addresses)
    }

    @Test func aFailedFamilyWithoutAddressesIsAFailureNeverNoAddress() {
        #expect(FamilyOutcome.combine([.failed, .noAddress]) == .failed)
        #expect(FamilyOutcome.combine([.noAddress, .failed]) == .failed)
        #expect(FamilyOutcome.combine([.failed, .failed]) == .failed)
        #expect(FamilyOutcome.combine([.failed]) == .failed)
    }

    @Test func noAddressOnlyWhenEveryFamilyAnswered() {
        #expect(FamilyOutcome.combine([.noAddress, .noAddress]) == .noAddress)
        #expect(FamilyOutcome.combine([.noAddress]) == .noAddress)
    }
}
