// Opt-in for stacks that build their own URLSessionConfiguration and never expose it (other HTTPDNS
// SDKs do this for AFNetworking): every session made afterwards gets HTTPDNSURLProtocol first in its
// protocolClasses. Apple platforms only (the Objective-C runtime). COMPILED FOR iOS 16 BY THE APPLE
// TYPE-CHECK, NEVER RUN HERE.
//
// Why it is safe, and the same rule as `URLSessionConfiguration.enableHTTPDNS(_:)` on Linux:
// - two class-method implementations are exchanged, once per process (a `static let` runs its
//   initializer once, thread-safely); there is no undo, so no half-swapped state to race with;
// - `+sessionWithConfiguration:` may call `+sessionWithConfiguration:delegate:delegateQueue:` itself:
//   `enableHTTPDNS(_:)` is idempotent (our class is first, once), so passing through both is harmless;
// - the app's configuration object is changed in place, as `enableHTTPDNS(_:)` does; URLSession copies it
//   when the session is made, so later changes by the app do not reach a session already made; the
//   slot's settings are fixed then too (`SlotTable.sessionMade`), so each session reads what its
//   configuration said when it was made, and a second session from the same object gets its own slot;
// - `URLSession.shared` is made without these methods and is left to `registerGlobally()`.

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

        /// Enables `interception` on every URLSession created from now on (`URLSession.shared`
        /// excluded). Call once, early; there is no undo (a later call makes another interception the
        /// one enabled).
        package static func enableForAllSessions(_ interception: Interception) {
            ProtocolBindings.allSessions = interception
            _ = swizzleOnce
        }
    }

    extension URLSession {
        // After the exchange each of these names runs the original implementation.
        @objc class func httpdns_session(configuration: URLSessionConfiguration) -> URLSession {
            enableAsMade(configuration)
            return httpdns_session(configuration: configuration)
        }

        @objc class func httpdns_session(
            configuration: URLSessionConfiguration,
            delegate: (any URLSessionDelegate)?,
            delegateQueue: OperationQueue?
        ) -> URLSession {
            enableAsMade(configuration)
            return httpdns_session(configuration: configuration, delegate: delegate, delegateQueue: delegateQueue)
        }

        /// A configuration an app object enabled itself keeps that object's interception; the others get
        /// the one `enableForAllSessions` named.
        private class func enableAsMade(_ configuration: URLSessionConfiguration) {
            let enabled = configuration.protocolClasses?.first { $0 is HTTPDNSURLProtocol.Type }
                .flatMap { ProtocolBindings.binding(of: $0)?.interception }
            guard let interception = enabled ?? ProtocolBindings.allSessions else { return }
            configuration.enableHTTPDNS(interception)
            interception.slots.sessionMade(from: configuration)
        }
    }
#endif
