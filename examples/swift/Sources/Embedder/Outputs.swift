// The sparse (SPLADE, BGE-M3 lexical weights) and multi-vector (ColBERT,
// BGE-M3) outputs.
import CEmbedder

/// One text's sparse vector: vocabulary ids ascending, with their weights
/// at the same positions. The vectors of one call are views (slices) of the
/// two buffers the library wrote.
public struct SparseVector: Sendable, Equatable {
    public let indices: ArraySlice<UInt32>
    public let values: ArraySlice<Float>

    public init(indices: ArraySlice<UInt32>, values: ArraySlice<Float>) {
        self.indices = indices
        self.values = values
    }

    public init(indices: [UInt32], values: [Float]) {
        self.init(indices: indices[...], values: values[...])
    }

    /// Number of non-zero entries.
    public var count: Int { indices.count }

    /// Dot product with another sparse vector (SPLADE's and BGE-M3 lexical
    /// matching's score), accumulated in Double.
    public func dot(_ other: SparseVector) -> Float {
        var acc = 0.0
        var i = indices.startIndex, j = other.indices.startIndex
        while i < indices.endIndex && j < other.indices.endIndex {
            let a = indices[i], b = other.indices[j]
            if a < b {
                i += 1
            } else if a > b {
                j += 1
            } else {
                acc += Double(values[values.startIndex + (i - indices.startIndex)])
                    * Double(other.values[other.values.startIndex + (j - other.indices.startIndex)])
                i += 1
                j += 1
            }
        }
        return Float(acc)
    }
}

/// One text's vectors (ColBERT): `count` vectors of `dim` floats, row-major in `data`.
public struct MultiVector: RandomAccessCollection, Sendable, Equatable {
    public let dim: Int
    public let data: ArraySlice<Float>

    public init(dim: Int, data: ArraySlice<Float>) {
        self.dim = dim
        self.data = data
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { dim == 0 ? 0 : data.count / dim }
    public subscript(i: Int) -> ArraySlice<Float> {
        let a = data.startIndex + i * dim
        return data[a..<(a + dim)]
    }

    /// ColBERT's late-interaction score of this query against `document`:
    /// the sum over this query's vectors of the largest dot product with one
    /// of the document's vectors (0 when the document has none).
    public func maxSim(_ document: MultiVector) throws -> Float {
        guard dim == document.dim else {
            throw EmbedderError.invalidArgument("maxSim of vectors of dimensions \(dim) and \(document.dim)")
        }
        if document.isEmpty { return 0 }
        var total: Float = 0
        for q in self {
            var best = -Float.infinity
            for d in document {
                var dot: Float = 0
                for (x, y) in zip(q, d) { dot += x * y }
                best = Swift.max(best, dot)
            }
            total += best
        }
        return total
    }
}

/// The output names of `Model.hasOutput` and `ModelInfo.outputs`.
public enum OutputName {
    public static let dense = "dense"
    public static let sparse = "sparse"
    public static let multiVector = "multi-vector"
}

/// Output buffers: a capacity that surely suffices up to this many elements
/// (a size query would cost a whole encode); beyond it a guess per text, and
/// when the library reports more, one more call at the size it gives.
let sureEntries = 1 << 22
let sparseGuess = 256
let multiVectorGuess = 64

extension Model {
    /// Whether the model has the output `name` ("dense", "sparse", "multi-vector").
    public func hasOutput(_ name: String) -> Bool {
        if name.utf8.contains(0) { return false }
        return embd_has_output(handle, name) == 1
    }

    /// The model's outputs, in the order dense, sparse, multi-vector.
    public var outputs: [String] {
        [OutputName.dense, OutputName.sparse, OutputName.multiVector].filter { hasOutput($0) }
    }

    /// Floats per vector of the multi-vector output (0 without it).
    public var multiVectorDim: Int { embd_multi_vector_dim(handle) }

    /// One sparse vector per text (SPLADE, BGE-M3's lexical weights),
    /// computed as one batch. `task` `.query` makes an inference-free SPLADE
    /// use its static query weights. `topK` keeps the largest weights of each
    /// text (nil: the model's own `max_active_dims`, else all non-zero
    /// weights). The options' prompt, prompt name and truncation apply. A
    /// model without the sparse output throws `.unsupported`.
    public func encodeSparse(_ texts: [String], task: EncodingTask = .unspecified, topK: Int? = nil,
                             options: CallOptions = CallOptions()) throws -> [SparseVector] {
        let n = texts.count
        if n == 0 { return [] }
        let k0 = try nonNegative(topK ?? 0, "topK")
        // At most min(vocabulary, top-k) entries per text.
        var k = embd_vocab_size(handle)
        if k0 > 0 && (k == 0 || k0 < k) { k = k0 }
        var capacity: Int
        if k == 0 {
            capacity = n * sparseGuess
        } else {
            capacity = n * k
            if capacity > sureEntries { capacity = Swift.min(n * k, Swift.max(sureEntries, n * sparseGuess)) }
        }
        return try options.withC { co in
            try withTexts(texts) { items in
                var offsets = [Int](repeating: 0, count: n + 1)
                for _ in 0..<2 {
                    var nnz = 0
                    var indices = [UInt32](repeating: 0, count: Swift.max(capacity, 1))
                    var values = [Float](repeating: 0, count: Swift.max(capacity, 1))
                    let st = embd_encode_sparse(handle, co, task.rawValue, items, n, k0, &offsets, &indices, &values,
                                                capacity, &nnz)
                    if st == EmbedderError.Status.bufferTooSmall.rawValue {
                        capacity = nnz
                        continue
                    }
                    try check(st)
                    if nnz < indices.count {
                        indices.removeSubrange(nnz...)
                        values.removeSubrange(nnz...)
                    }
                    return (0..<n).map { i in
                        SparseVector(indices: indices[offsets[i]..<offsets[i + 1]],
                                     values: values[offsets[i]..<offsets[i + 1]])
                    }
                }
                throw EmbedderError(status: .bufferTooSmall, message: "embd_encode_sparse asked for \(capacity) entries twice")
            }
        }
    }

    /// Each text's vectors (ColBERT, BGE-M3's colbert_vecs), computed as one
    /// batch. With `.query`, ColBERT's query marker and expansion; otherwise
    /// its document marker and skip-list. The rows share one buffer the
    /// library wrote. A model without the output throws `.unsupported`.
    public func encodeMultiVector(_ texts: [String], task: EncodingTask = .unspecified,
                                  options: CallOptions = CallOptions()) throws -> [MultiVector] {
        let n = texts.count
        if n == 0 { return [] }
        var dim = embd_multi_vector_dim(handle)
        // One vector per token at most (a query's expansion may exceed it:
        // then one more call at the size the library gives).
        var capacity = n * maxSeqLength * Swift.max(dim, 1)
        if capacity > sureEntries { capacity = Swift.max(sureEntries, n * multiVectorGuess * dim) }
        return try options.withC { co in
            try withTexts(texts) { items in
                var vectors = [Int](repeating: 0, count: n)
                for _ in 0..<2 {
                    var used = 0
                    var flat = [Float](repeating: 0, count: Swift.max(capacity, 1))
                    let st = embd_encode_multi_vector(handle, co, task.rawValue, items, n, &flat, capacity, &used,
                                                      &vectors)
                    if st == EmbedderError.Status.bufferTooSmall.rawValue {
                        capacity = used
                        continue
                    }
                    try check(st)
                    if used < flat.count { flat.removeSubrange(used...) }
                    let rows = vectors.reduce(0, +)
                    if rows > 0 { dim = used / rows }
                    var out: [MultiVector] = []
                    out.reserveCapacity(n)
                    var at = 0
                    for v in vectors {
                        out.append(MultiVector(dim: dim, data: flat[at..<(at + v * dim)]))
                        at += v * dim
                    }
                    return out
                }
                throw EmbedderError(status: .bufferTooSmall,
                                    message: "embd_encode_multi_vector asked for \(capacity) floats twice")
            }
        }
    }
}
