// One import for apps: `import HTTPDNSKit` brings the front door (`HTTPDNS`) and the public types of the
// modules it is built from.
@_exported import HTTPDNSCore
@_exported import HTTPDNSEngine
@_exported import HTTPDNSLookup
@_exported import HTTPDNSURLSession
// The SwiftNIO types the public API is written in (request headers, methods, statuses, body buffers).
@_exported import struct NIOCore.ByteBuffer
@_exported import struct NIOHTTP1.HTTPHeaders
@_exported import enum NIOHTTP1.HTTPMethod
@_exported import enum NIOHTTP1.HTTPResponseStatus
