// Apple platforms only (the Objective-C runtime). UNVERIFIED HERE: this machine cannot compile it.

#if canImport(ObjectiveC)
    import HTTPDNSURLSession

    extension HTTPDNS {
        /// Enables HTTPDNS on every URLSession created from now on (`URLSession.shared` excluded), for
        /// stacks that never expose their configuration. Call once, early; there is no undo.
        public func enableForAllSessions() {
            registerGlobally()
            HTTPDNSURLProtocol.enableForAllSessions()
        }
    }
#endif
