// service-list: ServiceListFormat's two readers (Alibaba's `ss` JSON, Tencent's `/conf` text) on hostile
// answers, the first byte choosing which, and ServiceAddressState driven by the rest.
//
// Whatever parses: each family holds only its own addresses, at most `maximumPerFamily`, and some
// address unless the service is switched off; what the server writes for those addresses reads back to
// them. Whatever events come, the order to try never repeats an address, always keeps the bootstrap
// addresses, and holds nothing else but the list's.

func fuzzServiceList(_ data: [UInt8]) {
    guard let selector = data.first else { return }
    let body = Array(data.dropFirst())
    let now = Timestamp.seconds(1_700_000_000)
    let list: ServiceList
    if selector % 2 == 0 {
        guard let parsed = try? ServiceListFormat.parseAlibaba(body, now: now) else { return }
        list = parsed
        let back = try? ServiceListFormat.parseAlibaba(
            ServiceListFormat.formatAlibaba(ipv4: list.ipv4, ipv6: list.ipv6),
            now: now
        )
        if !list.disabled { check(back?.all == list.all, "Alibaba list changed through its format") }
    } else {
        guard let parsed = try? ServiceListFormat.parseTencent(String(decoding: body, as: UTF8.self), now: now)
        else { return }
        list = parsed
        let back = try? ServiceListFormat.parseTencent(ServiceListFormat.formatTencent(list.all, minutes: 5), now: now)
        check(back?.all == list.all, "Tencent list changed through its format")
        check((60...86400).contains(Int(list.lifetime.seconds)), "lifetime \(list.lifetime) outside 1…1440 minutes")
    }
    check(list.ipv4.allSatisfy { !$0.isIPv6 } && list.ipv6.allSatisfy(\.isIPv6), "a family holds the other's")
    check(
        list.ipv4.count <= ServiceList.maximumPerFamily && list.ipv6.count <= ServiceList.maximumPerFamily,
        "\(list.ipv4.count)+\(list.ipv6.count) addresses kept"
    )
    check(list.disabled || !list.all.isEmpty, "a list with no address and not disabled")

    let bootstrap = [IPAddress("203.107.1.1")!, IPAddress("2401:b180::1")!]
    var state = ServiceAddressState(bootstrap: bootstrap)
    var clock = now
    for byte in body.prefix(64) {
        clock = clock + .seconds(Int(byte) * 7)
        switch byte % 6 {
        case 0: if state.fetchDue(now: clock) { state.fetchStarted(now: clock) }
        case 1: state.fetched(list)
        case 2: state.fetchFailed(now: clock)
        case 3: state.unreachable()
        default:
            let candidates = list.all + bootstrap
            if !candidates.isEmpty { state.answered(from: candidates[Int(byte) % candidates.count]) }
        }
        let order = state.addresses
        check(Set(order).count == order.count, "an address tried twice: \(order)")
        check(bootstrap.allSatisfy(order.contains), "the last resort is gone: \(order)")
        check(order.allSatisfy { bootstrap.contains($0) || list.all.contains($0) }, "a stranger in \(order)")
    }
}
