// What swift-corelibs-foundation (Linux, Windows) keeps internal but a URLProtocol needs: the task's
// session (for its delegate, cookie storage and extra headers), how the task reports its data, and the
// body of an upload task. Read with Mirror; every field is optional, and when a future corelibs moves
// one the protocol falls back to safe behaviour (no delegate: redirects followed; data delivered once;
// upload tasks without a reachable body fail with a clear error). Apple platforms use the public
// URLProtocol API instead and never compile this file.

#if !canImport(Darwin)
    import Dispatch
    import Foundation
    import FoundationNetworking
    import NIOConcurrencyHelpers

    struct CorelibsTask {
        enum KnownBody {
            case data(Data)
            case file(URL)
            case stream(InputStream)
        }

        var session: URLSession?
        /// The task's serial queue (it targets the session's): where corelibs' own protocol calls the
        /// client, and the only place the session's task registry may be touched from.
        var workQueue: DispatchQueue?
        /// The task registry's behaviour for the task: "callDelegate", "dataCompletionHandler", ...
        var behaviour: String?
        var knownBody: KnownBody?

        init(_ task: URLSessionTask?) {
            guard let task else { return }
            // One pass over the task's fields and one over the session's (Mirror is not cheap: this
            // runs once per intercepted request).
            let isUpload = task is URLSessionUploadTask
            let taskFields = Self.fields(
                of: task,
                isUpload ? ["session", "workQueue", "knownBody"] : ["session", "workQueue"]
            )
            session = taskFields["session"] as? URLSession
            workQueue = taskFields["workQueue"] as? DispatchQueue
            // Without a session delegate no task reports through one: the registry need not be read.
            if let session, session.delegate != nil,
                let registry = Self.fields(of: session, ["taskRegistry"])["taskRegistry"],
                let behaviours = Self.fields(of: registry, ["behaviours"])["behaviours"] as? [Int: Any],
                let behaviour = behaviours[task.taskIdentifier]
            {
                // The case name: a payload's label, or the description of a case without one.
                self.behaviour =
                    Mirror(reflecting: behaviour).children.first?.label
                    ?? String(describing: behaviour).split(separator: ".").last.map(String.init)
            }
            if let body = taskFields["knownBody"], let some = Mirror(reflecting: body).children.first?.value,
                let payload = Mirror(reflecting: some).children.first
            {
                switch (payload.label, payload.value) {
                case ("data", let data as DispatchData): knownBody = .data(Data(data))
                case ("file", let url as URL): knownBody = .file(url)
                case ("stream", let stream as InputStream): knownBody = .stream(stream)
                default: knownBody = nil
                }
            }
        }

        /// corelibs hands a completion handler (and `data(for:)`, with or without a task delegate)
        /// only the data of the last `didLoad`; only a delegate-driven task receives every chunk.
        var deliversEveryChunk: Bool { behaviour == "callDelegate" }

        /// The stored properties called `names` of `object`, its superclasses' included. Where each one
        /// sits (class depth, child offset) is learnt once per type, so later lookups extract just those
        /// children (Mirror boxes every child it walks past).
        static func fields(of object: Any, _ names: Set<String>) -> [String: Any] {
            let type = ObjectIdentifier(Swift.type(of: object))
            if let known = places.withLockedValue({ $0[type] }), names.isSubset(of: known.keys) {
                var found: [String: Any] = [:]
                var chain = [Mirror(reflecting: object)]  // one Mirror per class depth, made once
                for name in names {
                    let (depth, offset) = known[name]!
                    while chain.count <= depth { chain.append(chain[chain.count - 1].superclassMirror!) }
                    let children = chain[depth].children
                    found[name] = children[children.index(children.startIndex, offsetBy: offset)].value
                }
                return found
            }
            var found: [String: Any] = [:]
            var learnt: [String: (Int, Int)] = [:]
            var mirror: Mirror? = Mirror(reflecting: object)
            var depth = 0
            while let m = mirror, found.count < names.count {
                for (offset, child) in m.children.enumerated() {
                    guard let label = child.label, names.contains(label) else { continue }
                    found[label] = child.value
                    learnt[label] = (depth, offset)
                }
                mirror = m.superclassMirror
                depth += 1
            }
            places.withLockedValue { $0[type, default: [:]].merge(learnt) { $1 } }
            return found
        }

        private static let places = NIOLockedValueBox<[ObjectIdentifier: [String: (Int, Int)]]>([:])
    }
#endif
