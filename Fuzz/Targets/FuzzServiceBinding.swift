// svcb: HTTPS records (RFC 9460) from hostile RDATA and from hostile presentation text, then the encoder
// on what was read: encode what parses, parse what encodes.
//
// Whatever parses (either form) encodes without an error (a record the wire form cannot carry is refused
// by the parser, never by the first query that asks for it), and its RDATA reads back as the same record.
// The encoder refuses with `DNSWireError`; it never traps, truncates or wraps a length.

func fuzzServiceBinding(_ data: [UInt8]) {
    if let record = try? ServiceBinding(rdata: data) {
        roundTrip(record, from: "rdata")
    }
    if let record = try? ServiceBinding(parsing: String(decoding: data, as: UTF8.self)) {
        roundTrip(record, from: "text")
    }
}

private func roundTrip(_ record: ServiceBinding, from form: String) {
    let rdata: [UInt8]
    do {
        rdata = try record.rdata()
    } catch {
        fatalError("invariant broken: a record read from \(form) does not encode: \(error) (\(record))")
    }
    check(rdata.count <= 65_535, "RDATA of \(rdata.count) bytes")
    do {
        let back = try ServiceBinding(rdata: rdata)
        check(back == record, "\(form): \(record) came back as \(back)")
    } catch {
        fatalError("invariant broken: the RDATA written for a record read from \(form) does not read: \(error)")
    }
}
