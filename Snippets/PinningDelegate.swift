// A delegate that pins the origin's certificate: HTTPDNS asks it when our check refuses the certificate
// (a private CA), or for every connection with `serverTrustChallenges = .always`. Needs an origin signed
// by a CA the system does not trust: the test peers' nginx is one (scripts/peers.sh start DIR).
import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import HTTPDNSKit

// snippet.hide
let myPinnedCertificate = Data()  // the DER certificate the app ships
// snippet.show
final class Pinning: NSObject, URLSessionTaskDelegate, Sendable {
    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        guard let space = challenge.protectionSpace as? HTTPDNSServerTrustSpace else {
            return completionHandler(.performDefaultHandling, nil)
        }
        // The chain the server presented, DER, the leaf first; on Apple platforms also space.serverTrust.
        guard space.certificates.first == myPinnedCertificate else {
            return completionHandler(.cancelAuthenticationChallenge, nil)
        }
        #if canImport(Darwin)
            // Apple platforms accept with a trust credential, as for the system's own challenges.
            completionHandler(.useCredential, space.serverTrust.map(URLCredential.init(trust:)))
        #else
            completionHandler(.useCredential, nil)  // corelibs has no trust credential
        #endif
    }
}
// snippet.hide
_ = Pinning()
