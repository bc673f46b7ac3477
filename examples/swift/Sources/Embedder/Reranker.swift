// A cross-encoder (reranker), scoring pairs as sentence-transformers' CrossEncoder.
import CEmbedder

/// One (query, passage) pair to score.
public struct Pair: Sendable, Equatable {
    public var query: String
    public var passage: String
    public init(query: String, passage: String) {
        self.query = query
        self.passage = passage
    }
}

/// The scores of `Reranker.score`: `numLabels` values per pair, row-major.
public struct RerankScores: Sendable, Equatable {
    /// The model's activation of each logit (e.g. sigmoid).
    public let scores: [Float]
    public let logits: [Float]
    /// Each pair's token count and truncation.
    public let info: [TextInfo]
}

/// One document of a ranking.
public struct Ranked: Sendable, Equatable {
    /// The document's index in the call's documents.
    public let index: Int
    public let score: Float
    public let logit: Float
}

/// An open cross-encoder (`embd_reranker`): a model converted from a Hugging
/// Face `*ForSequenceClassification` folder, or such a folder. Sendable for
/// the reasons `Model` is: an immutable C handle the library lets many
/// threads use at once, `let` properties only, freed in `deinit`.
public final class Reranker: @unchecked Sendable {
    let handle: OpaquePointer
    private let progressBox: ProgressBox
    /// Scores per pair.
    public let numLabels: Int
    /// Tokens of a pair, special tokens included.
    public let maxLength: Int

    /// Opens a cross-encoder. An embedding model throws `.model` (open it with `Model`).
    public init(path: String, options: RerankerOptions = RerankerOptions()) throws {
        let box = ProgressBox(options.progress)
        var h: OpaquePointer?
        try withOpenOptions(box, { o in
            if let t = options.threads { try check(embd_options_set_threads(o, try nonNegative(t, "threads"))) }
            if let n = options.maxLength {
                try check(embd_options_set_max_seq_length(o, try nonNegative(n, "max length")))
            }
            if let p = options.precision { try check(embd_options_set_precision(o, p.rawValue)) }
            if let b = options.verifyChecksums { try check(embd_options_set_verify_checksums(o, b ? 1 : 0)) }
            if let b = options.prepackWeights { try check(embd_options_set_prepack_weights(o, b ? 1 : 0)) }
            try withOptionalCString(options.prompt, "prompt") { p in
                if p != nil { try check(embd_options_set_prompt(o, p)) }
            }
        }, { o in
            try check(embd_rerank_open(path, o, &h))
        })
        guard let handle = h else {
            throw EmbedderError(status: .internal, message: "embd_rerank_open returned no reranker")
        }
        self.handle = handle
        self.progressBox = box
        numLabels = embd_rerank_num_labels(handle)
        maxLength = embd_rerank_max_seq_length(handle)
    }

    deinit { embd_rerank_free(handle) }

    /// Each pair's scores and logits (`numLabels` per pair) and its token
    /// count and truncation. `prompt`: an LLM reranker's instruction for this
    /// call (Qwen3-Reranker's `<Instruct>`; nil: the one given at open, else
    /// the model's default); a cross-encoder without a prompt template
    /// throws `.invalidArgument` for a non-nil prompt.
    public func score(_ pairs: [Pair], prompt: String? = nil) throws -> RerankScores {
        let n = pairs.count
        if n == 0 { return RerankScores(scores: [], logits: [], info: []) }
        let texts = pairs.map(\.query) + pairs.map(\.passage)
        let len = n * numLabels
        var logits = [Float]()
        var tokens = [Int](repeating: 0, count: n)
        var truncated = [UInt8](repeating: 0, count: n)
        let scores: [Float] = try withOptionalCString(prompt, "prompt") { p in
            try withTexts(texts) { items in
                try written(len) { sc in
                    logits = try written(len) { lg in
                        try check(embd_rerank_score_prompted(handle, p, items, items + n, n, sc, lg, len,
                                                             &tokens, &truncated))
                    }
                }
            }
        }
        return RerankScores(scores: scores, logits: logits, info: textInfo(tokens, truncated))
    }

    /// The best `topK` documents for `query` (nil: all), best first, ties by
    /// index; by logit when `raw`. An empty query, no documents or a `topK`
    /// out of 1...documents.count throw `.invalidArgument`. `prompt` as in `score`.
    public func rank(_ query: String, documents: [String], topK: Int? = nil, raw: Bool = false,
                     prompt: String? = nil) throws -> [Ranked] {
        let k = try nonNegative(topK ?? documents.count, "topK")
        var got = 0
        let out: [embd_ranked] = try withOptionalCString(prompt, "prompt") { p in
            try withText(query) { q in
                try withTexts(documents) { docs in
                    try [embd_ranked](unsafeUninitializedCapacity: Swift.max(k, 1)) { buf, initialized in
                        initialized = 0
                        try check(embd_rerank_rank_prompted(handle, p, q, docs, documents.count, k, raw ? 1 : 0,
                                                            buf.baseAddress, buf.count, &got))
                        initialized = got
                    }
                }
            }
        }
        return out.map { Ranked(index: $0.index, score: $0.score, logit: $0.logit) }
    }

    /// The pair's token ids and token types as the model reads them (cut to `maxLength`).
    public func tokenize(query: String, passage: String) throws -> (ids: [UInt32], types: [UInt32]) {
        let capacity = maxLength + 1
        var n = 0
        var types = [UInt32]()
        let ids: [UInt32] = try withText(query) { q in
            try withText(passage) { p in
                try [UInt32](unsafeUninitializedCapacity: capacity) { ib, ni in
                    ni = 0
                    types = try [UInt32](unsafeUninitializedCapacity: capacity) { tb, nt in
                        nt = 0
                        try check(embd_rerank_tokenize(handle, q, p, ib.baseAddress, tb.baseAddress, capacity, &n))
                        nt = n
                    }
                    ni = n
                }
            }
        }
        return (ids, types)
    }
}
