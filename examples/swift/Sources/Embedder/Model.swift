// An open embedding model.
import CEmbedder

/// What one text became in an encoding call.
public struct TextInfo: Sendable, Equatable, CustomStringConvertible {
    /// Tokens the model saw, special (and prompt) tokens included, after truncation.
    public let tokens: Int
    /// True when the text had more than `maxSeqLength` tokens and the rest was cut off.
    public let truncated: Bool

    public init(tokens: Int, truncated: Bool) {
        self.tokens = tokens
        self.truncated = truncated
    }

    public var description: String { "TextInfo(tokens: \(tokens), truncated: \(truncated))" }
}

/// The vectors of one call: `count` rows of `dim` floats, row-major in
/// `data` (written there by the library, no copy), and each text's `TextInfo`.
/// A collection of rows (`ArraySlice<Float>` views of `data`).
public struct Embeddings: RandomAccessCollection, Sendable {
    /// Floats per vector.
    public let dim: Int
    /// All vectors, row-major.
    public let data: [Float]
    /// Token count and truncation of each text.
    public let info: [TextInfo]

    public var startIndex: Int { 0 }
    public var endIndex: Int { info.count }
    /// Row `i` (a view of `data`, no copy).
    public subscript(i: Int) -> ArraySlice<Float> { data[(i * dim)..<((i + 1) * dim)] }
    /// Every row as its own array (copies).
    public var rows: [[Float]] { map { Array($0) } }
}

/// Un-pooled token vectors of one call: text `i` has `info[i].tokens`
/// vectors of `dim` floats, all row-major in `data`.
public struct TokenEmbeddings: RandomAccessCollection, Sendable {
    public let dim: Int
    public let data: [Float]
    public let info: [TextInfo]
    /// `offsets[i]` is the index in `data` of text i's first float.
    let offsets: [Int]

    public var startIndex: Int { 0 }
    public var endIndex: Int { info.count }
    /// Text `i`'s token vectors, as an `Embeddings`-like matrix view.
    public subscript(i: Int) -> TokenVectors {
        TokenVectors(dim: dim, storage: data[offsets[i]..<(offsets[i] + info[i].tokens * dim)])
    }
}

/// One text's token vectors (a view into `TokenEmbeddings.data`).
public struct TokenVectors: RandomAccessCollection, Sendable {
    public let dim: Int
    public let storage: ArraySlice<Float>
    public var startIndex: Int { 0 }
    public var endIndex: Int { dim == 0 ? 0 : storage.count / dim }
    public subscript(t: Int) -> ArraySlice<Float> {
        let a = storage.startIndex + t * dim
        return storage[a..<(a + dim)]
    }
}

/// Quantized vectors of one call: `rowLength` bytes per text in `data`
/// (`dim` for int8/uint8, `(dim + 7) / 8` for binary/ubinary).
public struct QuantizedEmbeddings: RandomAccessCollection, Sendable {
    public let precision: OutputPrecision
    public let rowLength: Int
    /// The bytes as the library wrote them (Int8 values stored as their bit patterns).
    public let data: [UInt8]
    public let info: [TextInfo]

    public var startIndex: Int { 0 }
    public var endIndex: Int { info.count }
    /// Text `i`'s bytes (uint8 and ubinary).
    public subscript(i: Int) -> ArraySlice<UInt8> { data[(i * rowLength)..<((i + 1) * rowLength)] }
    /// Text `i`'s elements as Int8 (int8 and binary).
    public func int8Row(_ i: Int) -> [Int8] { self[i].map { Int8(bitPattern: $0) } }
}

/// What a model is: its metadata and outputs.
public struct ModelInfo: Sendable, Equatable {
    public let name: String
    /// Floats per dense vector (after `dimensions`).
    public let dim: Int
    public let maxSeqLength: Int
    public let numLayers: Int
    public let numHeads: Int
    public let vocabSize: Int
    /// "mean", "cls", "lasttoken", ...
    public let pooling: String
    public let normalizes: Bool
    public let precision: Precision
    /// Of "dense", "sparse", "multi-vector", in that order.
    public let outputs: [String]
    /// Floats per vector of the multi-vector output (0 without it).
    public let multiVectorDim: Int
    /// Whether the file stores ranges for int8/uint8 output (or the options gave them).
    public let hasOutputRanges: Bool
}

/// An open embedding model (`embd_model`).
///
/// Sendable: the C model is immutable after `embd_open` and the library
/// documents every call on it as safe from many threads at once (it takes no
/// global lock); every stored property is a `let`, and the progress handler
/// is `@Sendable`. The handle is freed in `deinit`, which runs only when no
/// reference (hence no running call) remains, so there is no `close()` and
/// no use-after-free.
public final class Model: @unchecked Sendable {
    let handle: OpaquePointer
    private let progressBox: ProgressBox
    /// Floats per vector (384 for all-MiniLM-L6-v2; `dimensions` when set).
    public let dim: Int
    /// Maximum sequence length in tokens, special tokens included.
    public let maxSeqLength: Int
    /// The model's name from its metadata.
    public let name: String
    /// The precision the dense layers run in (the option, else the file's own).
    public let precision: Precision

    /// Opens a model: an EMBD `.weights` file (or legacy cpp_embedder file),
    /// a Hugging Face folder, or another container the library reads.
    public init(path: String, options: ModelOptions = ModelOptions()) throws {
        let box = ProgressBox(options.progress)
        var h: OpaquePointer?
        try withOpenOptions(box, { o in
            if let t = options.threads { try check(embd_options_set_threads(o, try nonNegative(t, "threads"))) }
            if let n = options.maxSeqLength {
                try check(embd_options_set_max_seq_length(o, try nonNegative(n, "max sequence length")))
            }
            if let b = options.normalize { try check(embd_options_set_normalize(o, b ? 1 : 0)) }
            if let b = options.verifyChecksums { try check(embd_options_set_verify_checksums(o, b ? 1 : 0)) }
            if let b = options.prepackWeights { try check(embd_options_set_prepack_weights(o, b ? 1 : 0)) }
            if let p = options.precision { try check(embd_options_set_precision(o, p.rawValue)) }
            if let d = options.dimensions {
                try check(embd_options_set_dimensions(o, try nonNegative(d, "dimensions")))
            }
            if let r = options.outputRanges {
                var flat = r.min + r.max
                if r.min.count != r.max.count { flat.append(0) }  // an odd length: refused by the library
                try flat.withUnsafeBufferPointer { try check(embd_options_set_output_ranges(o, $0.baseAddress, $0.count)) }
            }
            try withOptionalCString(options.prompt, "prompt") { p in
                if p != nil { try check(embd_options_set_prompt(o, p)) }
            }
            try withOptionalCString(options.promptName, "prompt name") { p in
                if p != nil { try check(embd_options_set_prompt_name(o, p)) }
            }
            try withOptionalCString(options.matryoshka, "matryoshka recipe") { p in
                if p != nil { try check(embd_options_set_matryoshka(o, p)) }
            }
            if let overlap = options.windowOverlap {
                try check(embd_options_set_windows(o, 1, try nonNegative(overlap, "window overlap")))
            }
        }, { o in
            try check(embd_open(path, o, &h))
        })
        guard let handle = h else {
            throw EmbedderError(status: .internal, message: "embd_open returned no model")
        }
        self.handle = handle
        self.progressBox = box
        dim = embd_dim(handle)
        maxSeqLength = embd_max_seq_length(handle)
        name = embd_model_name(handle).map { String(cString: $0) } ?? ""
        precision = Precision(rawValue: embd_model_precision(handle)) ?? .f32
    }

    deinit { embd_free(handle) }

    /// The model's metadata and outputs.
    public var info: ModelInfo {
        ModelInfo(name: name, dim: dim, maxSeqLength: maxSeqLength, numLayers: embd_num_layers(handle),
                  numHeads: embd_num_heads(handle), vocabSize: embd_vocab_size(handle),
                  pooling: embd_pooling(handle).map { String(cString: $0) } ?? "",
                  normalizes: embd_normalizes(handle) == 1, precision: precision, outputs: outputs,
                  multiVectorDim: multiVectorDim, hasOutputRanges: embd_has_output_ranges(handle) == 1)
    }

    // MARK: dense vectors

    /// The vectors of `texts` with each text's token count and truncation,
    /// computed as one batch (each text gets exactly the vector it gets
    /// alone). With `options`, under those per-call options (`dim` becomes
    /// `options.dimensions`). Texts are UTF-8; NUL is ordinary text.
    public func encode(_ texts: [String], options: CallOptions? = nil) throws -> Embeddings {
        if let o = options {
            return try o.withC { co in
                var d = 0
                try check(embd_call_dim(handle, co, &d))
                return try encodeRows(texts, d) { items, out, outLen, tokens, truncated in
                    embd_encode_with(handle, co, items, texts.count, out, outLen, tokens, truncated)
                }
            }
        }
        return try encodeRows(texts, dim) { items, out, outLen, tokens, truncated in
            embd_encode_ex(handle, items, texts.count, out, outLen, tokens, truncated)
        }
    }

    private func encodeRows(_ texts: [String], _ d: Int,
                            _ call: (UnsafePointer<embd_text>, UnsafeMutablePointer<Float>, Int,
                                     UnsafeMutablePointer<Int>, UnsafeMutablePointer<UInt8>) -> Int32) throws -> Embeddings {
        let n = texts.count
        if n == 0 { return Embeddings(dim: d, data: [], info: []) }
        var tokens = [Int](repeating: 0, count: n)
        var truncated = [UInt8](repeating: 0, count: n)
        let data: [Float] = try written(n * d) { out in
            let st = withTexts(texts) { items in
                tokens.withUnsafeMutableBufferPointer { tk in
                    truncated.withUnsafeMutableBufferPointer { tr in
                        call(items, out, n * d, tk.baseAddress!, tr.baseAddress!)
                    }
                }
            }
            try check(st)
        }
        return Embeddings(dim: d, data: data, info: textInfo(tokens, truncated))
    }

    /// The vectors of `texts`, one array of `dim` floats each (`encode` without the info, copied per row).
    public func embed(_ texts: [String]) throws -> [[Float]] {
        try encode(texts).rows
    }

    /// The vector of one text, written by the library straight into the result.
    public func embed(_ text: String) throws -> [Float] {
        let d = dim
        return try written(d) { out in
            try check(withText(text) { t in
                withUnsafePointer(to: t) { embd_encode_texts(handle, $0, 1, out, d) }
            })
        }
    }

    // MARK: token vectors

    /// Each text's token vectors, un-pooled, as sentence-transformers'
    /// `encode(output_value="token_embeddings")`: the last hidden state of
    /// every token (special and prompt tokens included). The options'
    /// prompt, truncation and dimensions apply; the vectors are normalized
    /// only when `options.normalize` is true.
    public func encodeTokens(_ texts: [String], options: CallOptions = CallOptions()) throws -> TokenEmbeddings {
        let n = texts.count
        if n == 0 { return TokenEmbeddings(dim: dim, data: [], info: [], offsets: []) }
        return try options.withC { co in
            var d = 0
            try check(embd_call_dim(handle, co, &d))
            var tokens = [Int](repeating: 0, count: n)
            var truncated = [UInt8](repeating: 0, count: n)
            let data: [Float] = try withTexts(texts) { items in
                // The size first (the texts' token counts), then the vectors.
                var need = 0
                let st = embd_encode_tokens(handle, co, items, n, nil, 0, &need, &tokens, &truncated)
                if st != EmbedderError.Status.bufferTooSmall.rawValue {
                    try check(st)
                    throw EmbedderError(status: .internal, message: "embd_encode_tokens gave no size")
                }
                return try written(need) { out in
                    var wrote = 0
                    try check(embd_encode_tokens(handle, co, items, n, out, need, &wrote, &tokens, &truncated))
                }
            }
            var offsets = [Int](repeating: 0, count: n)
            var at = 0
            for i in 0..<n {
                offsets[i] = at
                at += tokens[i] * d
            }
            return TokenEmbeddings(dim: d, data: data, info: textInfo(tokens, truncated), offsets: offsets)
        }
    }

    // MARK: quantized vectors

    /// The vectors of `texts` in output precision `precision`, as
    /// sentence-transformers' `quantize_embeddings` would turn `encode`'s.
    /// `.int8`/`.uint8` need ranges (`ModelOptions.outputRanges`, or stored
    /// in the file), else `.invalidArgument`.
    public func encodeQuantized(_ texts: [String], precision: OutputPrecision) throws -> QuantizedEmbeddings {
        if precision == .float32 { throw EmbedderError.invalidArgument("float32 is not quantized: use encode") }
        let n = texts.count
        var len = 0
        try check(embd_output_len(handle, precision.rawValue, max(n, 1), &len))
        let rowLength = len / max(n, 1)
        if n == 0 { return QuantizedEmbeddings(precision: precision, rowLength: rowLength, data: [], info: []) }
        var tokens = [Int](repeating: 0, count: n)
        var truncated = [UInt8](repeating: 0, count: n)
        let data: [UInt8] = try written(len) { out in
            try check(withTexts(texts) { items in
                embd_encode_quantized(handle, items, n, precision.rawValue, UnsafeMutableRawPointer(out), len,
                                      &tokens, &truncated)
            })
        }
        return QuantizedEmbeddings(precision: precision, rowLength: rowLength, data: data,
                                   info: textInfo(tokens, truncated))
    }

    // MARK: tokens

    /// The token ids the model sees for `text` (special tokens included, truncated to `maxSeqLength`).
    public func tokenize(_ text: String) throws -> [UInt32] {
        // maxSeqLength ids at most, except for a static word-embedding model
        // (one id per word): then the library reports the size, and one more
        // call at that size.
        var capacity = maxSeqLength + 2
        for _ in 0..<2 {
            var n = 0
            var tooSmall = false
            let ids: [UInt32] = try [UInt32](unsafeUninitializedCapacity: capacity) { buf, initialized in
                initialized = 0
                let st = withText(text) { t in embd_tokenize(handle, t.ptr, t.len, buf.baseAddress, capacity, &n) }
                if st == EmbedderError.Status.bufferTooSmall.rawValue && n > capacity {
                    tooSmall = true
                    return
                }
                try check(st)
                initialized = n
            }
            if !tooSmall { return ids }
            capacity = n
        }
        throw EmbedderError(status: .bufferTooSmall, message: "embd_tokenize asked for \(capacity) ids twice")
    }

    /// The number of tokens of `text` as the model sees it (`tokenize(text).count`, without the ids).
    public func countTokens(_ text: String) throws -> Int {
        var n = 0
        try check(withText(text) { t in embd_count_tokens(handle, t.ptr, t.len, &n) })
        return n
    }
}

/// Cosine similarity of two vectors of the same length (`embd_similarity`; 0 when either is all zeros).
public func cosineSimilarity<A: Collection, B: Collection>(_ a: A, _ b: B) throws -> Float
where A.Element == Float, B.Element == Float {
    guard a.count == b.count else {
        throw EmbedderError.invalidArgument("lengths differ: \(a.count) vs \(b.count)")
    }
    var s: Float = 0
    let st: Int32? = a.withContiguousStorageIfAvailable { pa in
        b.withContiguousStorageIfAvailable { pb in embd_similarity(pa.baseAddress, pb.baseAddress, pa.count, &s) }
    } ?? nil
    if let st = st {
        try check(st)
    } else {
        try check(embd_similarity(Array(a), Array(b), a.count, &s))
    }
    return s
}
