// DES (FIPS 46-3), ECB mode, PKCS#7 padding — for one purpose only: Tencent Cloud HTTPDNS's `alg=des`
// queries, which the service still accepts and some accounts are still set up with.
//
// DES is broken: a 56-bit key falls to exhaustive search in hours, and ECB shows equal blocks as equal.
// It protects the queried name from casual reading and nothing more. It is here because the service
// requires it; prefer `alg=aes` (AES-128-CBC) or the HTTPS token form. swift-crypto has no DES, so this
// file is a plain, table-driven implementation written for clarity, not speed (a query is one or two
// blocks). It is checked against known answers from OpenSSL (`openssl enc -des-ecb -provider legacy`)
// and the classic FIPS example in DESTests.
//
// Tables are as printed in FIPS 46-3: bit 1 is the most significant bit of the block.

/// DES in ECB mode with PKCS#7 padding (8-byte key, 8-byte blocks). Weak; see the file's note.
enum DESECB {
    /// A key with its sixteen round keys worked out once (a cipher keeps one per account).
    package struct Key: Sendable {
        let subkeys: [UInt64]

        /// An 8-byte key; its parity bits are ignored, as in every DES implementation.
        init(_ bytes: [UInt8]) {
            precondition(bytes.count == 8, "a DES key is 8 bytes")
            subkeys = DESECB.schedule(bytes)
        }
    }

    /// Encrypts `plaintext`, padded with PKCS#7 to a multiple of 8 bytes.
    static func encrypt(_ plaintext: [UInt8], key: Key) -> [UInt8] {
        let subkeys = key.subkeys
        let padCount = 8 - plaintext.count % 8
        let padded = plaintext + [UInt8](repeating: UInt8(padCount), count: padCount)
        var out: [UInt8] = []
        out.reserveCapacity(padded.count)
        for start in stride(from: 0, to: padded.count, by: 8) {
            let block = crypt(load(padded, at: start), subkeys: subkeys, decrypting: false)
            store(block, into: &out)
        }
        return out
    }

    /// Decrypts and removes PKCS#7 padding. Nil when the input is not a whole number of blocks or the
    /// padding is wrong (a wrong key, or a tampered or truncated ciphertext).
    static func decrypt(_ ciphertext: [UInt8], key: Key) -> [UInt8]? {
        guard !ciphertext.isEmpty, ciphertext.count % 8 == 0 else { return nil }
        let subkeys = key.subkeys
        var out: [UInt8] = []
        out.reserveCapacity(ciphertext.count)
        for start in stride(from: 0, to: ciphertext.count, by: 8) {
            store(crypt(load(ciphertext, at: start), subkeys: subkeys, decrypting: true), into: &out)
        }
        return removingPKCS7Padding(out, blockSize: 8)
    }

    // MARK: the cipher

    static func crypt(_ block: UInt64, subkeys: [UInt64], decrypting: Bool) -> UInt64 {
        let permuted = permute(block, width: 64, table: initialPermutation)
        var left = UInt32(truncatingIfNeeded: permuted >> 32)
        var right = UInt32(truncatingIfNeeded: permuted)
        for round in 0..<16 {
            let key = subkeys[decrypting ? 15 - round : round]
            (left, right) = (right, left ^ feistel(right, key))
        }
        // The halves are swapped once more after the last round.
        return permute(UInt64(right) << 32 | UInt64(left), width: 64, table: finalPermutation)
    }

    /// E, the key, then the S-boxes and P in one lookup per box (`spBoxes`).
    static func feistel(_ half: UInt32, _ subkey: UInt64) -> UInt32 {
        let expanded = permute(UInt64(half), width: 32, table: expansion) ^ subkey
        var out: UInt32 = 0
        for box in 0..<8 { out |= spBoxes[box][Int((expanded >> (42 - 6 * box)) & 0x3F)] }
        return out
    }

    /// `spBoxes[box][six]`: S-box `box` applied to the six bits `six`, its four output bits put in the
    /// box's place and then through P. P only moves bits, so P of the whole S output is the OR of
    /// these: the round's S and P steps become eight lookups. Worked out from the FIPS tables below.
    static let spBoxes: [[UInt32]] = (0..<8).map { box in
        (0..<64).map { six in
            let row = (six & 0x20) >> 4 | (six & 0x01)
            let column = (six >> 1) & 0x0F
            let placed = UInt64(sBoxes[box][row * 16 + column]) << (28 - 4 * box)
            return UInt32(permute(placed, width: 32, table: roundPermutation))
        }
    }

    /// The sixteen 48-bit round keys.
    static func schedule(_ key: [UInt8]) -> [UInt64] {
        let chosen = permute(load(key, at: 0), width: 64, table: permutedChoice1)
        var c = UInt32(truncatingIfNeeded: chosen >> 28) & 0x0FFF_FFFF
        var d = UInt32(truncatingIfNeeded: chosen) & 0x0FFF_FFFF
        func rotate(_ x: UInt32, _ n: UInt32) -> UInt32 { ((x << n) | (x >> (28 - n))) & 0x0FFF_FFFF }
        return keyShifts.map { shift in
            c = rotate(c, shift)
            d = rotate(d, shift)
            return permute(UInt64(c) << 28 | UInt64(d), width: 56, table: permutedChoice2)
        }
    }

    /// Output bit i is input bit `table[i]` (1-based, counted from the most significant of `width`).
    static func permute(_ input: UInt64, width: Int, table: [UInt8]) -> UInt64 {
        var out: UInt64 = 0
        for position in table {
            out = out << 1 | (input >> UInt64(width - Int(position))) & 1
        }
        return out
    }

    static func load(_ bytes: [UInt8], at start: Int) -> UInt64 {
        bytes[start..<start + 8].reduce(0) { $0 << 8 | UInt64($1) }
    }

    static func store(_ block: UInt64, into out: inout [UInt8]) {
        for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: block >> shift)) }
    }

    // MARK: FIPS 46-3 tables

    static let initialPermutation: [UInt8] = [
        58, 50, 42, 34, 26, 18, 10, 2, 60, 52, 44, 36, 28, 20, 12, 4,
        62, 54, 46, 38, 30, 22, 14, 6, 64, 56, 48, 40, 32, 24, 16, 8,
        57, 49, 41, 33, 25, 17, 9, 1, 59, 51, 43, 35, 27, 19, 11, 3,
        61, 53, 45, 37, 29, 21, 13, 5, 63, 55, 47, 39, 31, 23, 15, 7,
    ]
    static let finalPermutation: [UInt8] = [
        40, 8, 48, 16, 56, 24, 64, 32, 39, 7, 47, 15, 55, 23, 63, 31,
        38, 6, 46, 14, 54, 22, 62, 30, 37, 5, 45, 13, 53, 21, 61, 29,
        36, 4, 44, 12, 52, 20, 60, 28, 35, 3, 43, 11, 51, 19, 59, 27,
        34, 2, 42, 10, 50, 18, 58, 26, 33, 1, 41, 9, 49, 17, 57, 25,
    ]
    static let expansion: [UInt8] = [
        32, 1, 2, 3, 4, 5, 4, 5, 6, 7, 8, 9, 8, 9, 10, 11, 12, 13, 12, 13, 14, 15, 16, 17,
        16, 17, 18, 19, 20, 21, 20, 21, 22, 23, 24, 25, 24, 25, 26, 27, 28, 29, 28, 29, 30, 31, 32, 1,
    ]
    static let roundPermutation: [UInt8] = [
        16, 7, 20, 21, 29, 12, 28, 17, 1, 15, 23, 26, 5, 18, 31, 10,
        2, 8, 24, 14, 32, 27, 3, 9, 19, 13, 30, 6, 22, 11, 4, 25,
    ]
    static let permutedChoice1: [UInt8] = [
        57, 49, 41, 33, 25, 17, 9, 1, 58, 50, 42, 34, 26, 18,
        10, 2, 59, 51, 43, 35, 27, 19, 11, 3, 60, 52, 44, 36,
        63, 55, 47, 39, 31, 23, 15, 7, 62, 54, 46, 38, 30, 22,
        14, 6, 61, 53, 45, 37, 29, 21, 13, 5, 28, 20, 12, 4,
    ]
    static let permutedChoice2: [UInt8] = [
        14, 17, 11, 24, 1, 5, 3, 28, 15, 6, 21, 10, 23, 19, 12, 4, 26, 8, 16, 7, 27, 20, 13, 2,
        41, 52, 31, 37, 47, 55, 30, 40, 51, 45, 33, 48, 44, 49, 39, 56, 34, 53, 46, 42, 50, 36, 29, 32,
    ]
    static let keyShifts: [UInt32] = [1, 1, 2, 2, 2, 2, 2, 2, 1, 2, 2, 2, 2, 2, 2, 1]
    static let sBoxes: [[UInt8]] = [
        [
            14, 4, 13, 1, 2, 15, 11, 8, 3, 10, 6, 12, 5, 9, 0, 7,
            0, 15, 7, 4, 14, 2, 13, 1, 10, 6, 12, 11, 9, 5, 3, 8,
            4, 1, 14, 8, 13, 6, 2, 11, 15, 12, 9, 7, 3, 10, 5, 0,
            15, 12, 8, 2, 4, 9, 1, 7, 5, 11, 3, 14, 10, 0, 6, 13,
        ],
        [
            15, 1, 8, 14, 6, 11, 3, 4, 9, 7, 2, 13, 12, 0, 5, 10,
            3, 13, 4, 7, 15, 2, 8, 14, 12, 0, 1, 10, 6, 9, 11, 5,
            0, 14, 7, 11, 10, 4, 13, 1, 5, 8, 12, 6, 9, 3, 2, 15,
            13, 8, 10, 1, 3, 15, 4, 2, 11, 6, 7, 12, 0, 5, 14, 9,
        ],
        [
            10, 0, 9, 14, 6, 3, 15, 5, 1, 13, 12, 7, 11, 4, 2, 8,
            13, 7, 0, 9, 3, 4, 6, 10, 2, 8, 5, 14, 12, 11, 15, 1,
            13, 6, 4, 9, 8, 15, 3, 0, 11, 1, 2, 12, 5, 10, 14, 7,
            1, 10, 13, 0, 6, 9, 8, 7, 4, 15, 14, 3, 11, 5, 2, 12,
        ],
        [
            7, 13, 14, 3, 0, 6, 9, 10, 1, 2, 8, 5, 11, 12, 4, 15,
            13, 8, 11, 5, 6, 15, 0, 3, 4, 7, 2, 12, 1, 10, 14, 9,
            10, 6, 9, 0, 12, 11, 7, 13, 15, 1, 3, 14, 5, 2, 8, 4,
            3, 15, 0, 6, 10, 1, 13, 8, 9, 4, 5, 11, 12, 7, 2, 14,
        ],
        [
            2, 12, 4, 1, 7, 10, 11, 6, 8, 5, 3, 15, 13, 0, 14, 9,
            14, 11, 2, 12, 4, 7, 13, 1, 5, 0, 15, 10, 3, 9, 8, 6,
            4, 2, 1, 11, 10, 13, 7, 8, 15, 9, 12, 5, 6, 3, 0, 14,
            11, 8, 12, 7, 1, 14, 2, 13, 6, 15, 0, 9, 10, 4, 5, 3,
        ],
        [
            12, 1, 10, 15, 9, 2, 6, 8, 0, 13, 3, 4, 14, 7, 5, 11,
            10, 15, 4, 2, 7, 12, 9, 5, 6, 1, 13, 14, 0, 11, 3, 8,
            9, 14, 15, 5, 2, 8, 12, 3, 7, 0, 4, 10, 1, 13, 11, 6,
            4, 3, 2, 12, 9, 5, 15, 10, 11, 14, 1, 7, 6, 0, 8, 13,
        ],
        [
            4, 11, 2, 14, 15, 0, 8, 13, 3, 12, 9, 7, 5, 10, 6, 1,
            13, 0, 11, 7, 4, 9, 1, 10, 14, 3, 5, 12, 2, 15, 8, 6,
            1, 4, 11, 13, 12, 3, 7, 14, 10, 15, 6, 8, 0, 5, 9, 2,
            6, 11, 13, 8, 1, 4, 10, 7, 9, 5, 0, 15, 14, 2, 3, 12,
        ],
        [
            13, 2, 8, 4, 6, 15, 11, 1, 10, 9, 3, 14, 5, 0, 12, 7,
            1, 15, 13, 8, 10, 3, 7, 4, 12, 5, 6, 11, 0, 14, 9, 2,
            7, 11, 4, 1, 9, 12, 14, 2, 0, 6, 10, 13, 15, 3, 5, 8,
            2, 1, 14, 7, 4, 10, 8, 13, 15, 12, 9, 0, 3, 5, 6, 11,
        ],
    ]
}

/// `bytes` without its PKCS#7 padding, or nil when the padding is not valid for `blockSize`.
func removingPKCS7Padding(_ bytes: [UInt8], blockSize: Int) -> [UInt8]? {
    guard let last = bytes.last, last >= 1, Int(last) <= blockSize, Int(last) <= bytes.count else { return nil }
    guard bytes.suffix(Int(last)).allSatisfy({ $0 == last }) else { return nil }
    return Array(bytes.dropLast(Int(last)))
}
