// The loopback proxy route's Objective-C methods on `HDNSService` (HTTPDNSKit's facade): each is one
// call of the Swift API. Apple platforms only (the Objective-C runtime). COMPILED FOR iOS 16 BY THE APPLE
// CHECK, NEVER RUN HERE.

#if canImport(ObjectiveC)
    import Foundation
    import HTTPDNSKit

    extension HTTPDNSObjectiveC {
        /// Points `configuration` at the loopback proxy (the proxy route, iOS 17 and later) and calls
        /// `completion` with nil, or the error. Objective-C: `configureProxyOnConfiguration:completion:`.
        ///
        /// - Parameters:
        ///   - configuration: The configuration to point at the proxy, changed in place.
        ///   - completion: Called once, with nil, or the error `HTTPDNS.configure(_:via:)` threw.
        @objc(configureProxyOnConfiguration:completion:)
        public func configureProxy(
            on configuration: URLSessionConfiguration,
            completion: @escaping @Sendable ((any Error)?) -> Void
        ) {
            let httpdns = httpdns
            let box = UncheckedConfiguration(configuration)
            Task {
                do {
                    try await httpdns.configure(box.configuration, via: .proxy)
                    completion(nil)
                } catch {
                    completion(error)
                }
            }
        }

        /// Starts the loopback proxy (once) and calls `completion` with its port, or 0 and the error.
        /// Objective-C: `startProxyWithCompletion:`.
        ///
        /// - Parameter completion: Called once, with the proxy's port and nil, or 0 and the error
        ///   `HTTPDNS.loopbackProxy()` threw.
        @objc(startProxyWithCompletion:)
        public func startProxy(completion: @escaping @Sendable (Int, (any Error)?) -> Void) {
            let httpdns = httpdns
            Task {
                do {
                    completion(try await httpdns.loopbackProxy().port, nil)
                } catch {
                    completion(0, error)
                }
            }
        }
    }

    /// A configuration handed to the task that configures it: the caller gave it up to that call, as
    /// the completion-handler API says.
    private struct UncheckedConfiguration: @unchecked Sendable {
        let configuration: URLSessionConfiguration
        init(_ configuration: URLSessionConfiguration) { self.configuration = configuration }
    }
#endif
