// AVPlayer with the address in an http URL and the name in the Host header (an https stream goes
// through the loopback proxy instead: see WebViewProxy). Apple platforms only; needs a stream server.
// snippet.hide
#if canImport(AVFoundation)
    // snippet.show
    import AVFoundation
    import HTTPDNSKit

    let httpdns = try HTTPDNS(resolvers: ["doh:https://223.5.5.5/dns-query"], only: ["*.example.com"])
    let direct = try await httpdns.resolver.ipDirectURL(for: URL(string: "http://video.example.com/live.m3u8")!)
    let asset = AVURLAsset(url: direct.url, options: ["AVURLAssetHTTPHeaderFieldsKey": direct.headers])
    let player = AVPlayer(playerItem: AVPlayerItem(asset: asset))
// snippet.hide
#endif
