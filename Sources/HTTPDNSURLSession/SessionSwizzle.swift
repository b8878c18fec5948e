// Opt-in for stacks that build their own URLSessionConfiguration and never expose it (the seeds did
// this for AFNetworking): every session made afterwards gets HTTPDNSURLProtocol first in its
// protocolClasses. Apple platforms only (the ObjectiveC runtime). UNVERIFIED HERE: this machine cannot
// compile it; it is kept to two exchanges of implementations.

#if canImport(ObjectiveC)
    import Foundation
    import ObjectiveC

    extension HTTPDNSURLProtocol {
        private static let swizzleOnce: Void = {
            // +[NSURLSession sessionWithConfiguration:] and +sessionWithConfiguration:delegate:delegateQueue:
            let pairs: [(Selector, Selector)] = [
                (
                    #selector(URLSession.init(configuration:)),
                    #selector(URLSession.httpdns_session(configuration:))
                ),
                (
                    #selector(URLSession.init(configuration:delegate:delegateQueue:)),
                    #selector(URLSession.httpdns_session(configuration:delegate:delegateQueue:))
                ),
            ]
            for (original, replacement) in pairs {
                guard let a = class_getClassMethod(URLSession.self, original),
                    let b = class_getClassMethod(URLSession.self, replacement)
                else { continue }
                method_exchangeImplementations(a, b)
            }
        }()

        /// Enables HTTPDNS on every URLSession created from now on (`URLSession.shared` excluded).
        /// Call once, early; there is no undo.
        package static func enableForAllSessions() { _ = swizzleOnce }
    }

    extension URLSession {
        // After the exchange each of these names runs the original implementation.
        @objc class func httpdns_session(configuration: URLSessionConfiguration) -> URLSession {
            configuration.enableHTTPDNS()
            return httpdns_session(configuration: configuration)
        }

        @objc class func httpdns_session(
            configuration: URLSessionConfiguration,
            delegate: (any URLSessionDelegate)?,
            delegateQueue: OperationQueue?
        ) -> URLSession {
            configuration.enableHTTPDNS()
            return httpdns_session(configuration: configuration, delegate: delegate, delegateQueue: delegateQueue)
        }
    }
#endif
