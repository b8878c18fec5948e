// Apple platforms only (the Objective-C runtime). COMPILED FOR iOS 16 BY THE APPLE TYPE-CHECK, NEVER RUN
// HERE; the exchange and why it is safe are in HTTPDNSURLSession/Sessions/SessionSwizzle.swift.

#if canImport(ObjectiveC)
    import HTTPDNSURLSession

    extension HTTPDNS {
        /// Enables HTTPDNS on every URLSession created from now on (`URLSession.shared` excluded), for
        /// stacks that never expose their configuration. Call once, early; there is no undo.
        public func enableForAllSessions() {
            registerGlobally()
            HTTPDNSURLProtocol.enableForAllSessions(interception)
        }
    }
#endif
