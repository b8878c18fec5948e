// des: DES-ECB decryption and the hex layer of Tencent Cloud DNSPod's `alg=des` answers, on hostile bytes.
//
// Whatever decrypts with valid padding encrypts back to exactly the input (ECB is deterministic),
// whatever encrypts decrypts back, and hex round-trips in either case.

private let key = DESECB.Key(Array("dnspodpa".utf8))

func fuzzDES(_ data: [UInt8]) {
    let hex = hexEncoded(data)
    check(hexDecoded(hex) == data, "hex does not round-trip")
    check(hexDecoded(hex.uppercased()) == data, "upper-case hex reads otherwise")
    if let plain = DESECB.decrypt(data, key: key) {
        check(DESECB.encrypt(plain, key: key) == data, "decrypted text does not encrypt back to the input")
    }
    // Whatever encrypts decrypts back to itself.
    let sealed = DESECB.encrypt(data, key: key)
    check(sealed.count % 8 == 0 && sealed.count > data.count, "ciphertext is not whole padded blocks")
    check(DESECB.decrypt(sealed, key: key) == data, "encrypted bytes do not decrypt back")
}
