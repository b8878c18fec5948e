// Body echo for the tests: reports what arrived, with a SHA-256 of the body so the client can check it
// byte for byte without the server sending it back.
var crypto = require('crypto');

function bodylen(r) {
    var b = r.requestBuffer;  // undefined when there is no body
    var out = {
        method: r.method,
        length: b ? b.length : 0,
        sha256: crypto.createHash('sha256').update(b ? b : '').digest('hex'),
        content_length: r.headersIn['Content-Length'] || null,
        transfer_encoding: r.headersIn['Transfer-Encoding'] || null,
        content_type: r.headersIn['Content-Type'] || null,
        host: r.headersIn['Host'] || null,
        sni: r.variables.ssl_server_name || null,
        proto: r.variables.server_protocol,
        uri: r.uri
    };
    r.headersOut['Content-Type'] = 'application/json';
    r.return(200, JSON.stringify(out) + "\n");
}

export default { bodylen };
