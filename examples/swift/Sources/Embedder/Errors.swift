// Errors of the embedder library as typed Swift errors.
import CEmbedder

/// An error from the embedder library: the `embd_status` code and the
/// library's detailed message (`embd_last_error()`, read right after the
/// failing call on the same thread), or an argument the Swift wrapper refused
/// before calling the library (then `status` is `.invalidArgument`).
///
/// `catch EmbedderError.Status.notFound { ... }` matches by status, as does
/// `catch let e as EmbedderError where e.status == .notFound`.
public struct EmbedderError: Error, Sendable, Equatable, CustomStringConvertible {
    /// An `embd_status` code. The numbers are stable (include/embedder.h);
    /// an unknown number is kept as is.
    public struct Status: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: Int32
        public init(rawValue: Int32) { self.rawValue = rawValue }

        public static let ok = Status(rawValue: 0)
        public static let nullArgument = Status(rawValue: 1)
        public static let invalidArgument = Status(rawValue: 2)
        public static let invalidHandle = Status(rawValue: 3)
        public static let bufferTooSmall = Status(rawValue: 4)
        public static let invalidUTF8 = Status(rawValue: 5)
        public static let limitExceeded = Status(rawValue: 6)
        public static let cancelled = Status(rawValue: 7)
        public static let notFound = Status(rawValue: 20)
        public static let io = Status(rawValue: 21)
        public static let unknownFormat = Status(rawValue: 30)
        public static let format = Status(rawValue: 31)
        public static let checksum = Status(rawValue: 32)
        public static let unsupported = Status(rawValue: 40)
        public static let model = Status(rawValue: 41)
        public static let outOfMemory = Status(rawValue: 50)
        public static let `internal` = Status(rawValue: 90)
        public static let internalPanic = Status(rawValue: 91)

        /// The library's phrase for the status (`embd_status_str`), e.g. "file not found".
        public var description: String { String(cString: embd_status_str(rawValue)) }

        /// `catch EmbedderError.Status.notFound`: matches an `EmbedderError` with this status.
        public static func ~= (status: Status, error: Error) -> Bool {
            (error as? EmbedderError)?.status == status
        }
    }

    /// The status code.
    public let status: Status
    /// The detailed message.
    public let message: String

    public init(status: Status, message: String) {
        self.status = status
        self.message = message
    }

    /// "file not found (status 20): embd_open: ..."
    public var description: String { "\(status) (status \(status.rawValue)): \(message)" }

    /// The error of the call that just failed with `status`: reads
    /// `embd_last_error()` now, on this thread (the message is per thread,
    /// and no code between the failing call and this one can move the
    /// caller to another thread: both run in the same synchronous function).
    static func last(_ status: Int32) -> EmbedderError {
        let text = embd_last_error().map { String(cString: $0) } ?? ""
        let s = Status(rawValue: status)
        return EmbedderError(status: s, message: text.isEmpty ? s.description : text)
    }

    static func invalidArgument(_ message: String) -> EmbedderError {
        EmbedderError(status: .invalidArgument, message: message)
    }
}

/// Throws the library's error unless `status` is `EMBD_STATUS_OK`.
@inline(__always)
func check(_ status: Int32) throws {
    if status != 0 { throw EmbedderError.last(status) }
}

/// Throws `.invalidArgument` when `value` is negative (the C API takes `size_t`).
@inline(__always)
func nonNegative(_ value: Int, _ what: String) throws -> Int {
    if value < 0 { throw EmbedderError.invalidArgument("\(what) must not be negative (got \(value))") }
    return value
}

/// The library version, "MAJOR.MINOR.PATCH" (`embd_version`).
public var embedderVersion: String { String(cString: embd_version()) }
