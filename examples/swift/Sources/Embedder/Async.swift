// async variants: the same calls, run off Swift's cooperative pool (see
// `offCooperativePool`); cancelling the calling task stops the call at its
// next progress point and throws `CancellationError`.

extension Model {
    /// Opens a model off the cooperative pool (opening reads and may convert the whole file).
    public static func open(path: String, options: ModelOptions = ModelOptions()) async throws -> Model {
        try await offCooperativePool { try Model(path: path, options: options) }
    }

    public func encode(_ texts: [String], options: CallOptions? = nil) async throws -> Embeddings {
        try await offCooperativePool { try self.encode(texts, options: options) }
    }

    public func embed(_ texts: [String]) async throws -> [[Float]] {
        try await offCooperativePool { try self.embed(texts) }
    }

    public func embed(_ text: String) async throws -> [Float] {
        try await offCooperativePool { try self.embed(text) }
    }

    public func encodeTokens(_ texts: [String], options: CallOptions = CallOptions()) async throws -> TokenEmbeddings {
        try await offCooperativePool { try self.encodeTokens(texts, options: options) }
    }

    public func encodeQuantized(_ texts: [String], precision: OutputPrecision) async throws -> QuantizedEmbeddings {
        try await offCooperativePool { try self.encodeQuantized(texts, precision: precision) }
    }

    public func encodeSparse(_ texts: [String], task: EncodingTask = .unspecified, topK: Int? = nil,
                             options: CallOptions = CallOptions()) async throws -> [SparseVector] {
        try await offCooperativePool { try self.encodeSparse(texts, task: task, topK: topK, options: options) }
    }

    public func encodeMultiVector(_ texts: [String], task: EncodingTask = .unspecified,
                                  options: CallOptions = CallOptions()) async throws -> [MultiVector] {
        try await offCooperativePool { try self.encodeMultiVector(texts, task: task, options: options) }
    }
}

extension Reranker {
    /// Opens a cross-encoder off the cooperative pool.
    public static func open(path: String, options: RerankerOptions = RerankerOptions()) async throws -> Reranker {
        try await offCooperativePool { try Reranker(path: path, options: options) }
    }

    public func score(_ pairs: [Pair], prompt: String? = nil) async throws -> RerankScores {
        try await offCooperativePool { try self.score(pairs, prompt: prompt) }
    }

    public func rank(_ query: String, documents: [String], topK: Int? = nil, raw: Bool = false,
                     prompt: String? = nil) async throws -> [Ranked] {
        try await offCooperativePool {
            try self.rank(query, documents: documents, topK: topK, raw: raw, prompt: prompt)
        }
    }
}
