// The one table from engine error codes to the URLError codes apps expect.

import Foundation
@testable import HTTPDNSEngine
@testable import HTTPDNSURLSession
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import Testing

@Suite struct URLErrorMappingTests {
    static let allCodes: [HTTPEngineError.Code] = [
        .invalidRequest, .nameNotResolved, .noAddresses, .connectFailed, .connectTimeout, .untrustedCertificate,
        .certificateNameMismatch, .pinMismatch, .tlsFailed, .tlsHandshakeTimeout, .readTimeout, .totalTimeout,
        .protocolError, .responseTooLarge, .tooManyRedirects, .cancelled, .shutdown,
    ]

    @Test func everyEngineCodeHasAURLErrorCode() {
        for code in Self.allCodes {
            #expect(Translation.urlErrorCodes[code] != nil, "\(code) is not mapped")
        }
        #expect(Translation.urlErrorCodes.count == Self.allCodes.count)
    }

    @Test func tlsFailuresMapToTheirOwnURLErrors() {
        func mapped(_ code: HTTPEngineError.Code) -> URLError.Code {
            Translation.urlError(HTTPEngineError(code, "x"), url: nil).code
        }
        #expect(mapped(.untrustedCertificate) == .serverCertificateUntrusted)
        #expect(mapped(.certificateNameMismatch) == .serverCertificateUntrusted, "Apple's -1202, not -1200")
        #expect(mapped(.pinMismatch) == .secureConnectionFailed)
        #expect(mapped(.tlsFailed) == .secureConnectionFailed)
        #expect(mapped(.totalTimeout) == .timedOut)
        #expect(mapped(.tlsHandshakeTimeout) == .timedOut)
        let error = Translation.urlError(HTTPEngineError(.pinMismatch, "x"), url: nil)
        #expect((error.userInfo[HTTPDNSURLProtocol.engineErrorKey] as? HTTPEngineError)?.code == .pinMismatch)
    }

    @Test func noNetworkIsNotConnectedToInternetWithTheReasonAppsRetryBy() {
        var offline = HTTPEngineError(.connectFailed, "could not connect")
        offline.networkUnavailable = NetworkUnavailable()
        let none = Translation.urlError(offline, url: nil)
        #expect(none.code == .notConnectedToInternet)
        #expect(none.userInfo[Translation.networkUnavailableReasonKey] == nil)
        offline.networkUnavailable = NetworkUnavailable(reason: .constrained)
        let lowData = Translation.urlError(offline, url: nil)
        #expect(lowData.code == .notConnectedToInternet)
        #expect(lowData.userInfo[Translation.networkUnavailableReasonKey] as? Int == 2)
        #if canImport(Darwin)
            #expect(lowData.networkUnavailableReason == .constrained)
        #endif
        // Offline with a name not cached: not "cannot find host" (-1003), which says the name is wrong.
        var offlineLookup = HTTPEngineError(.nameNotResolved, "could not resolve a.test")
        offlineLookup.networkUnavailable = NetworkUnavailable()
        #expect(Translation.urlError(offlineLookup, url: nil).code == .notConnectedToInternet)
        #expect(
            Translation.urlError(HTTPEngineError(.nameNotResolved, "no such name"), url: nil).code == .cannotFindHost
        )
        // A server that refuses is still "cannot connect to host".
        #expect(Translation.urlError(HTTPEngineError(.connectFailed, "refused"), url: nil).code == .cannotConnectToHost)
    }
}
