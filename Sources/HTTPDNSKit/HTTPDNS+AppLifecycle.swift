// The app's background and foreground, which the route modules' state follows (the loopback proxy's
// listener, taken back by the system in the background, starts again in the foreground) and the system
// encrypted-DNS mode checks its server on. On UIKit platforms HTTPDNS observes the notices itself.

import Foundation
import NIOConcurrencyHelpers

#if canImport(UIKit)
    import UIKit
#endif

extension HTTPDNS {
    /// Tells HTTPDNS the app went to the background. On UIKit platforms HTTPDNS observes this itself.
    public func applicationDidEnterBackground() {
        for attachment in attachments.withLockedValue({ $0.all }) {
            attachment.enteredBackground()
        }
    }

    /// Tells HTTPDNS the app came back to the foreground: the loopback proxy starts again if the system
    /// took its listener, and the system encrypted-DNS mode checks its server. On UIKit platforms HTTPDNS
    /// observes this itself.
    public func applicationWillEnterForeground() async {
        encryptedDNS.withLockedValue { $0 }?.conditionsChanged()
        for attachment in attachments.withLockedValue({ $0.all }) {
            await attachment.enteredForeground()
        }
    }

    /// On UIKit platforms, starts following the app's background and foreground notices (once).
    func observeAppLifecycle() {
        #if canImport(UIKit) && !os(watchOS)
            // COMPILED FOR iOS 16 BY THE APPLE CHECK, NEVER RUN HERE; what the notices trigger is what
            // the Linux tests call directly (applicationDidEnterBackground / WillEnterForeground).
            guard appLifecycleObservers.withLockedValue({ $0.tokens.isEmpty }) else { return }
            let center = NotificationCenter.default
            let background = center.addObserver(
                forName: UIApplication.didEnterBackgroundNotification,
                object: nil,
                queue: nil
            ) { [weak self] _ in self?.applicationDidEnterBackground() }
            let foreground = center.addObserver(
                forName: UIApplication.willEnterForegroundNotification,
                object: nil,
                queue: nil
            ) { [weak self] _ in
                guard let self else { return }
                Task { await self.applicationWillEnterForeground() }
            }
            // Two first uses at once: the one that stores its observers first keeps them.
            let kept = appLifecycleObservers.withLockedValue { observers -> Bool in
                guard observers.tokens.isEmpty else { return false }
                observers.tokens = [background, foreground]
                return true
            }
            if !kept {
                center.removeObserver(background)
                center.removeObserver(foreground)
            }
        #endif
    }
}

/// The notification observers `observeAppLifecycle()` added (tokens NotificationCenter lets any thread
/// remove).
struct AppLifecycleObservers: @unchecked Sendable {
    var tokens: [any NSObjectProtocol] = []
}
