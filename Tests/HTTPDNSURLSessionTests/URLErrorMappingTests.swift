// The one table from engine error codes to the URLError codes apps expect.

import Foundation
import HTTPDNSEngine
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
        #expect(mapped(.certificateNameMismatch) == .secureConnectionFailed)
        #expect(mapped(.pinMismatch) == .secureConnectionFailed)
        #expect(mapped(.tlsFailed) == .secureConnectionFailed)
        #expect(mapped(.totalTimeout) == .timedOut)
        #expect(mapped(.tlsHandshakeTimeout) == .timedOut)
        let error = Translation.urlError(HTTPEngineError(.pinMismatch, "x"), url: nil)
        #expect((error.userInfo[HTTPDNSURLProtocol.engineErrorKey] as? HTTPEngineError)?.code == .pinMismatch)
    }
}
