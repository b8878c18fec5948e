// Writes to the few fields swift-corelibs-foundation keeps internal but sets for its own protocol
// only, so a task served here reports what the same task served by corelibs reports:
//   URLSessionTask._currentRequest              the request of the last redirect hop followed
//   URLSessionTask.countOfBytesExpectedToReceive  the response's Content-Length
//   URLProtocol.properties[.temporaryFileURL]  where a download task's file is (corelibs reads it, and
//                                               crashes without it, when the download finishes)
// Each field is found by name through the runtime's field metadata (the offsets the compiler laid the
// class out with) and written only when its declared type is exactly the one expected; a corelibs that
// renames or retypes one makes the write a no-op (the task then reports what it did before). Writes
// are made where corelibs itself touches the task: on the task's work queue, the current request
// under the task's own lock queue. Apple platforms never compile this file.

#if !canImport(Darwin)
    @_spi(Reflection) import Swift
    import Dispatch
    import Foundation
    import FoundationNetworking
    import NIOConcurrencyHelpers

    enum CorelibsFields {
        private struct Field {
            let offset: Int
            let type: Any.Type
        }
        private static let known = NIOLockedValueBox<[String: Field?]>([:])

        /// The stored field `name` declared by `type` itself (not its superclasses).
        private static func field(_ name: String, declaredIn type: AnyClass) -> Field? {
            let key = "\(ObjectIdentifier(type)).\(name)"
            if let cached = known.withLockedValue({ $0[key] }) { return cached }
            var found: Field?
            // `_EachFieldOptions.classType` is a static var the compiler cannot prove safe; its value is 1 << 0.
            _ = _forEachField(of: type, options: _EachFieldOptions(rawValue: 1 << 0)) {
                fieldName,
                offset,
                fieldType,
                _ in
                guard String(cString: fieldName) == name else { return true }
                found = Field(offset: offset, type: fieldType)
                return false
            }
            known.withLockedValue { $0[key] = found }
            return found
        }

        /// Stores `value` in `object`'s field `name` (declared by `type`) when that field's type is
        /// exactly `T`; false when it is not there.
        @discardableResult
        static func write<T>(_ value: T, to name: String, of object: NSObject, declaredIn type: AnyClass) -> Bool {
            guard object.isKind(of: type), let field = field(name, declaredIn: type), field.type == T.self else {
                return false
            }
            let base = Unmanaged.passUnretained(object).toOpaque()
            (base + field.offset).assumingMemoryBound(to: T.self).pointee = value
            return true
        }

        /// The value of `object`'s field `name` when its type is exactly `T`.
        static func read<T>(_ name: String, as: T.Type, of object: NSObject, declaredIn type: AnyClass) -> T? {
            guard object.isKind(of: type), let field = field(name, declaredIn: type), field.type == T.self else {
                return nil
            }
            let base = Unmanaged.passUnretained(object).toOpaque()
            return (base + field.offset).assumingMemoryBound(to: T.self).pointee
        }

        /// Sets the task's current request (after a redirect the protocol followed itself).
        static func setCurrentRequest(_ request: URLRequest, of task: URLSessionTask) {
            let write = {
                _ = Self.write(Optional(request), to: "_currentRequest", of: task, declaredIn: URLSessionTask.self)
            }
            if let lock = read("syncQ", as: DispatchQueue.self, of: task, declaredIn: URLSessionTask.self) {
                lock.sync(execute: write)
            }
        }

        static func setBytesSent(_ sent: Int64, expected: Int64, of task: URLSessionTask) {
            write(sent, to: "_countOfBytesSent", of: task, declaredIn: URLSessionTask.self)
            write(expected, to: "countOfBytesExpectedToSend", of: task, declaredIn: URLSessionTask.self)
        }

        static func setExpectedToReceive(_ count: Int64, of task: URLSessionTask) {
            write(count, to: "countOfBytesExpectedToReceive", of: task, declaredIn: URLSessionTask.self)
        }

        /// Tells corelibs where a download task's file is, as its own protocol does; false when the
        /// field cannot be written (the download then fails instead of finishing without a file).
        static func setTemporaryFileURL(_ url: URL, of urlProtocol: URLProtocol) -> Bool {
            var mirror: Mirror? = Mirror(reflecting: urlProtocol)
            while let m = mirror, m.subjectType != URLProtocol.self { mirror = m.superclassMirror }
            guard let current = mirror?.children.first(where: { $0.label == "properties" })?.value,
                let bag = current as? any TemporaryFileBag
            else { return false }
            return bag.storing(url, in: urlProtocol)
        }
    }

    /// corelibs' `[URLProtocol._PropertyKey: Any]`, whose key type is internal: the dictionary is
    /// reached through this conformance, its key made from the raw value corelibs declares.
    private protocol TemporaryFileBag {
        func storing(_ url: URL, in urlProtocol: URLProtocol) -> Bool
    }

    extension Dictionary: TemporaryFileBag where Value == Any {
        fileprivate func storing(_ url: URL, in urlProtocol: URLProtocol) -> Bool {
            guard let keyType = Key.self as? any RawRepresentable.Type,
                let key = makeKey(keyType, rawValue: "temporaryFileURL") as? Key
            else { return false }
            var copy = self
            copy[key] = url
            return CorelibsFields.write(copy, to: "properties", of: urlProtocol, declaredIn: URLProtocol.self)
        }
    }

    private func makeKey<K: RawRepresentable>(_ type: K.Type, rawValue: String) -> K? {
        (rawValue as? K.RawValue).flatMap(K.init(rawValue:))
    }
#endif
