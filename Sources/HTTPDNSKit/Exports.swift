// One import for apps: `import HTTPDNSKit` brings the front door (`HTTPDNS`) and the public types of the
// modules it is built from.
@_exported import HTTPDNSCore
@_exported import HTTPDNSEngine
@_exported import HTTPDNSLookup
@_exported import HTTPDNSLocalProxy
@_exported import HTTPDNSURLSession
