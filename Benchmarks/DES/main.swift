// Times DES-ECB (ours, pure Swift) on the 13-byte name of the vendor's example: one query's seal + open,
// the key's round keys worked out once (as DNSPodCipher keeps them).
import Foundation
let key = DESECB.Key(Array("dnspodpa".utf8))
let name = Array("www.dnspod.cn".utf8)
let n = Int(CommandLine.arguments.dropFirst().first ?? "") ?? 100_000
var sink = 0
let start = Date()
for _ in 0..<n {
    let sealed = DESECB.encrypt(name, key: key)
    sink &+= DESECB.decrypt(sealed, key: key)!.count
}
let elapsed = Date().timeIntervalSince(start)
print(
    "ours: \(n) seal+open in \(String(format: "%.3f", elapsed)) s = \(String(format: "%.2f", elapsed / Double(n) * 1e6)) µs each (sink \(sink))"
)
