// Fetching the vendors' service-IP lists for the providers that have one: in the
// background when a query finds its provider's list due (ServiceAddressState decides), never on the
// query's path; saved beside the cache file after each new list, and restored from it at start, so a
// restarted app uses the addresses it learnt instead of the bootstrap ones.

import HTTPDNSCore
import NIOCore

extension HTTPDNSResolver {
    /// The providers with a service list, by their index.
    var listedProviders: [(index: Int, provider: any ServiceListProvider, routes: ServiceAddresses)] {
        providers.enumerated().compactMap { index, provider in
            guard let listed = provider as? any ServiceListProvider, let routes = listed.routes else { return nil }
            return (index, listed, routes)
        }
    }

    /// Gives each listed provider the list saved for it, if any.
    func restoreServiceLists() {
        guard let path = configuration.persistencePath else { return }
        let saved = ServiceListPersistence.load(path: ServiceListPersistence.path(besideCache: path), logger: logger)
        for (_, provider, routes) in listedProviders {
            if let list = saved[provider.name] { routes.restore(list) }
        }
    }

    /// Starts a background fetch of provider `index`'s list when one is due.
    func fetchServiceListIfDue(_ index: Int) {
        guard let listed = providers[index] as? any ServiceListProvider, let routes = listed.routes else { return }
        startServiceListFetch(index, listed, routes, force: false)
    }

    /// Fetches every provider's list now (`force`) or those due, and returns when they have ended. The CLI
    /// calls it before a one-shot lookup; tests use it as their barrier.
    package func refreshServiceLists(force: Bool = false) async {
        for (index, provider, routes) in listedProviders {
            startServiceListFetch(index, provider, routes, force: force)
        }
        await waitForServiceListFetches()
    }

    /// The routes of provider `index` (tests and diagnostics).
    func serviceAddresses(_ index: Int) -> ServiceAddressState? {
        (providers[index] as? any ServiceListProvider)?.routes?.snapshot
    }

    func waitForServiceListFetches() async {
        while true {
            let running = state.withLockedValue { Array($0.listFetches.values) }
            if running.isEmpty { return }
            for task in running { await task.value }
        }
    }

    private func startServiceListFetch(
        _ index: Int,
        _ provider: any ServiceListProvider,
        _ routes: ServiceAddresses,
        force: Bool
    ) {
        guard routes.beginFetchIfDue(now: clock.now(), force: force) else { return }
        // Created under the lock, so it is on record before it can end and remove itself.
        state.withLockedValue { state in
            state.listFetches[index] = Task {
                await self.fetchServiceList(provider, routes)
                _ = self.state.withLockedValue { $0.listFetches.removeValue(forKey: index) }
            }
        }
    }

    private func fetchServiceList(_ provider: any ServiceListProvider, _ routes: ServiceAddresses) async {
        let deadline = NIODeadline.now() + TimeAmount(configuration.timeout)
        do {
            let list = try await provider.fetchServiceList(deadline: deadline, now: clock.now())
            routes.finished(.success(list), now: clock.now())
            logger.debug(
                "service list fetched",
                metadata: [
                    "provider": "\(provider.name)", "ipv4": "\(list.ipv4.count)", "ipv6": "\(list.ipv6.count)",
                    "disabled": "\(list.disabled)",
                ]
            )
            saveServiceLists()
        } catch {
            routes.finished(.failure(error), now: clock.now())
            logger.warning(
                "could not fetch the service list; using the addresses known",
                metadata: ["provider": "\(provider.name)", "error": "\(error)"]
            )
        }
    }

    /// Writes every provider's current list beside the cache file (one writer at a time, so an older
    /// set never replaces a newer one).
    private func saveServiceLists() {
        guard let cache = configuration.persistencePath else { return }
        listWrites.withLock {
            var lists: [String: ServiceList] = [:]
            for (_, provider, routes) in listedProviders {
                if let list = routes.snapshot.list { lists[provider.name] = list }
            }
            do {
                try ServiceListPersistence.save(lists, path: ServiceListPersistence.path(besideCache: cache))
            } catch {
                logger.warning("could not save the service lists", metadata: ["error": "\(error)"])
            }
        }
    }
}
