// Opt-in for stacks that build their own URLSessionConfiguration and never expose it (the seeds did
// this for AFNetworking): every session made afterwards gets HTTPDNSURLProtocol first in its
// protocolClasses. Apple platforms only (the ObjectiveC runtime). UNVERIFIED HERE: this machine cannot
// compile it; it is kept to the one exchange of implementations below.

#if canImport(ObjectiveC)
    import Foundation
    import ObjectiveC

    extension HTTPDNSURLProtocol {
        private static let swizzleOnce: Void = {
            // +[NSURLSession sessionWithConfiguration:delegate:delegateQueue:], which every init goes to.
            let original = #selector(URLSession.init(configuration:delegate:delegateQueue:))
            let replacement = #selector(URLSession.httpdns_session(configuration:delegate:delegateQueue:))
            guard let a = class_getClassMethod(URLSession.self, original),
                let b = class_getClassMethod(URLSession.self, replacement)
            else { return }
            method_exchangeImplementations(a, b)
        }()

        /// Enables HTTPDNS on every URLSession created from now on (`URLSession.shared` excluded).
        /// Call once, early; there is no undo.
        public static func enableForAllSessions() { _ = swizzleOnce }
    }

    extension URLSession {
        @objc class func httpdns_session(
            configuration: URLSessionConfiguration,
            delegate: (any URLSessionDelegate)?,
            delegateQueue: OperationQueue?
        ) -> URLSession {
            configuration.enableHTTPDNS()
            // After the exchange this name runs the original implementation.
            return httpdns_session(configuration: configuration, delegate: delegate, delegateQueue: delegateQueue)
        }
    }
#endif
