// Swift wrapper over the embedder C API (CEmbedder). A `Model` owns one
// embd_model handle: it is freed in deinit, every failing call throws an
// `EmbedderError` carrying the embd_status code and embd_last_error(), and
// Swift strings are passed as (pointer, length) pairs (embd_text), so they
// need no NUL terminator.
//
// Thread safety: an embd_model is immutable after embd_open, so one Model may
// be used from many threads at once (the class is final and its only stored
// property is immutable, hence @unchecked Sendable). The error message is read
// right after the failing call on the same thread (embd_last_error is per
// thread; Swift code between the two calls does not migrate threads).
import CEmbedder

/// An error from the embedder library: the embd_status number, its phrase and
/// the library's detailed message.
public struct EmbedderError: Error, CustomStringConvertible, Equatable {
    /// The embd_status value (EMBD_STATUS_NOT_FOUND = 20, ...).
    public let status: Int32
    /// The detailed message (embd_last_error() at the time of the failure).
    public let message: String

    public var description: String {
        "\(String(cString: embd_status_str(status))) (status \(status)): \(message)"
    }

    /// embd_status numbers used by the wrapper itself (see embedder.h).
    public static let invalidArgument: Int32 = 2
    public static let internalError: Int32 = 90

    /// The error of a failed call: reads embd_last_error() now, on this thread.
    static func last(_ status: Int32) -> EmbedderError {
        EmbedderError(status: status, message: String(cString: embd_last_error()))
    }
}

/// Arithmetic of the encoder's dense layers (embd_precision; the raw values
/// are the header's EMBD_PRECISION_* constants). Attention, LayerNorm, GELU
/// and pooling always run in Float.
public enum Precision: Int32, CustomStringConvertible {
    /// Float weights and activations: the reference numbers (EMBD_PRECISION_F32).
    case f32 = 1
    /// Weights and activations rounded to bfloat16, Float accumulation (EMBD_PRECISION_BF16).
    case bf16 = 2
    /// int8 weights and activations, exact int32 accumulation (EMBD_PRECISION_INT8).
    case int8 = 3

    /// "f32", "bf16" or "int8" (embd_precision_name), as the embd command line spells it.
    public var description: String {
        embd_precision_name(rawValue).map { String(cString: $0) } ?? "Precision(\(rawValue))"
    }
}

/// Options for `Model.init(path:options:)`; nil fields keep the library's defaults.
public struct ModelOptions {
    /// Worker threads per call (0 = all CPUs).
    public var threads: Int?
    /// Maximum sequence length override in tokens (0 = the model's own).
    public var maxSeqLength: Int?
    /// true: L2-normalize; false: raw pooled vectors; nil: the model's default.
    public var normalize: Bool?
    /// Verify the file's checksums at open (default true).
    public var verifyChecksums: Bool?
    /// Arithmetic of the dense layers; nil: the file's own (int8 for files
    /// converted with --dtype int8, else f32). A lower precision than the
    /// file's converts the weights at open.
    public var precision: Precision?

    public init(threads: Int? = nil, maxSeqLength: Int? = nil, normalize: Bool? = nil, verifyChecksums: Bool? = nil,
                precision: Precision? = nil) {
        self.threads = threads
        self.maxSeqLength = maxSeqLength
        self.normalize = normalize
        self.verifyChecksums = verifyChecksums
        self.precision = precision
    }
}

@inline(__always)
private func check(_ status: Int32) throws {
    if status != 0 { throw EmbedderError.last(status) }
}

/// Calls `body` with the UTF-8 bytes of `text` as (pointer, length); the
/// pointer is nil for the empty string. No copy when the string is native.
private func withUTF8Text<R>(_ text: String, _ body: (UnsafePointer<CChar>?, Int) throws -> R) rethrows -> R {
    var s = text
    return try s.withUTF8 { u in
        try body(u.baseAddress.map { UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self) }, u.count)
    }
}

/// An open model file.
public final class Model: @unchecked Sendable {
    private let handle: OpaquePointer

    /// Opens a model file (EMBD .weights or a legacy cpp_embedder file).
    public init(path: String, options: ModelOptions = ModelOptions()) throws {
        guard let opts = embd_options_new() else {
            throw EmbedderError.last(EmbedderError.internalError)
        }
        defer { embd_options_free(opts) }
        if let t = options.threads { try check(embd_options_set_threads(opts, t)) }
        if let n = options.maxSeqLength { try check(embd_options_set_max_seq_length(opts, n)) }
        if let b = options.normalize { try check(embd_options_set_normalize(opts, b ? 1 : 0)) }
        if let b = options.verifyChecksums { try check(embd_options_set_verify_checksums(opts, b ? 1 : 0)) }
        if let p = options.precision { try check(embd_options_set_precision(opts, p.rawValue)) }
        var h: OpaquePointer?
        try check(embd_open(path, opts, &h))
        guard let handle = h else {
            throw EmbedderError(status: EmbedderError.internalError, message: "embd_open returned no model")
        }
        self.handle = handle
    }

    deinit { embd_free(handle) }

    /// Floats per embedding (384 for all-MiniLM-L6-v2).
    public var dim: Int { embd_dim(handle) }
    /// Maximum sequence length in tokens, [CLS] and [SEP] included.
    public var maxSeqLength: Int { embd_max_seq_length(handle) }
    /// The model's name from its metadata.
    public var name: String { embd_model_name(handle).map { String(cString: $0) } ?? "" }
    /// The precision the dense layers run in (the option, else the file's own).
    public var precision: Precision { Precision(rawValue: embd_model_precision(handle)) ?? .f32 }

    /// Embeddings of `texts`, one `dim`-float vector each, computed as one batch.
    public func embed(_ texts: [String]) throws -> [[Float]] {
        if texts.isEmpty { return [] }
        let d = dim
        // One contiguous UTF-8 buffer, sliced into (pointer, length) pairs.
        var bytes: [UInt8] = []
        var lengths: [Int] = []
        for t in texts {
            let u = Array(t.utf8)
            lengths.append(u.count)
            bytes.append(contentsOf: u)
        }
        var flat = [Float](repeating: 0, count: texts.count * d)
        if bytes.isEmpty { bytes.append(0) }  // all texts empty: keep a valid base address
        let status: Int32 = bytes.withUnsafeBufferPointer { buf in
            let base = UnsafeRawPointer(buf.baseAddress!).assumingMemoryBound(to: CChar.self)
            var items: [embd_text] = []
            items.reserveCapacity(texts.count)
            var off = 0
            for n in lengths {
                items.append(embd_text(ptr: n == 0 ? nil : base + off, len: n))
                off += n
            }
            return flat.withUnsafeMutableBufferPointer { out in
                embd_encode_texts(handle, items, items.count, out.baseAddress, out.count)
            }
        }
        try check(status)
        return (0..<texts.count).map { Array(flat[($0 * d)..<(($0 + 1) * d)]) }
    }

    /// The embedding of one text.
    public func embed(_ text: String) throws -> [Float] {
        try embed([text])[0]
    }

    /// Token ids as the model sees them ([CLS] ... [SEP], truncated).
    public func tokenize(_ text: String) throws -> [UInt32] {
        var ids = [UInt32](repeating: 0, count: max(maxSeqLength, 2))
        var n = 0
        let status: Int32 = withUTF8Text(text) { p, len in
            ids.withUnsafeMutableBufferPointer { out in
                embd_tokenize(handle, p, len, out.baseAddress, out.count, &n)
            }
        }
        try check(status)
        return Array(ids[0..<n])
    }

    /// Number of tokens of `text` as the model sees it.
    public func countTokens(_ text: String) throws -> Int {
        var n = 0
        let status: Int32 = withUTF8Text(text) { p, len in
            embd_count_tokens(handle, p, len, &n)
        }
        try check(status)
        return n
    }
}

/// Cosine similarity of two vectors of the same length (embd_similarity).
public func cosineSimilarity(_ a: [Float], _ b: [Float]) throws -> Float {
    guard a.count == b.count else {
        throw EmbedderError(status: EmbedderError.invalidArgument,
                            message: "lengths differ: \(a.count) vs \(b.count)")
    }
    var s: Float = 0
    try check(embd_similarity(a, b, a.count, &s))
    return s
}

/// The library version, "MAJOR.MINOR.PATCH".
public var embedderVersion: String { String(cString: embd_version()) }
