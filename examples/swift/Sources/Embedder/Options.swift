// Open-time and per-call options.
import CEmbedder

/// Arithmetic of the encoder's dense layers (`embd_precision`; the raw values
/// are the header's `EMBD_PRECISION_*`). Attention, LayerNorm, GELU and
/// pooling always run in Float.
public enum Precision: Int32, Sendable, CaseIterable, CustomStringConvertible {
    /// Float weights and activations: the reference numbers.
    case f32 = 1
    /// Weights and activations rounded to bfloat16, Float accumulation.
    case bf16 = 2
    /// int8 weights (per output channel) and activations (per token), exact int32 accumulation.
    case int8 = 3

    /// "f32", "bf16" or "int8" (`embd_precision_name`), as the embd command line spells it.
    public var description: String {
        embd_precision_name(rawValue).map { String(cString: $0) } ?? "Precision(\(rawValue))"
    }

    /// Parses "f32", "bf16" or "int8" (ASCII case-insensitive).
    public init?(name: String) {
        guard let p = Precision.allCases.first(where: { $0.description == name.lowercased() }) else { return nil }
        self = p
    }
}

/// Per-dimension ranges of `.int8`/`.uint8` output (sentence-transformers'
/// `ranges`): `min[j]`, `max[j]` for each output dimension.
public struct OutputRanges: Sendable, Equatable {
    public var min: [Float]
    public var max: [Float]
    public init(min: [Float], max: [Float]) {
        self.min = min
        self.max = max
    }
}

/// Called between chunks of work of every encoding call on a model (at least
/// every ~50 ms of work), on the calling thread, with the number of the
/// call's texts whose vectors are complete and the call's number of texts.
/// Return `false` to stop the call: it throws `EmbedderError` with status
/// `.cancelled`. May be called from several threads at once when several
/// threads encode on the model, hence `@Sendable`. It must not call the same
/// model.
public typealias ProgressHandler = @Sendable (_ done: Int, _ total: Int) -> Bool

/// Options of `Model.init(path:options:)`; nil fields keep the library's defaults.
public struct ModelOptions: Sendable {
    /// Worker threads per call (0 = all CPUs, the default).
    public var threads: Int?
    /// Maximum sequence length in tokens (0 = the model's own). Out of the
    /// model's range: `.invalidArgument` or `.model` at open.
    public var maxSeqLength: Int?
    /// true: L2-normalize; false: raw pooled vectors; nil: the model's metadata.
    public var normalize: Bool?
    /// Verify the file's checksums at open (default true).
    public var verifyChecksums: Bool?
    /// Repack the weights at open for the kernels (default true).
    public var prepackWeights: Bool?
    /// Arithmetic of the dense layers; nil: the file's own. A lower precision
    /// than the file's converts the weights at open.
    public var precision: Precision?
    /// Keep only the first `dimensions` components (Matryoshka; renormalized
    /// when the model normalizes). nil or 0: all.
    public var dimensions: Int?
    /// How a vector is cut to `dimensions`: "truncate" (nil, the default:
    /// sentence-transformers' `truncate_dim`) or "layer-norm"
    /// (nomic-embed-text-v1.5's recipe: layer norm without affine, the cut,
    /// L2 normalization; applied with or without `dimensions`). Another name
    /// is refused at open.
    public var matryoshka: String?
    /// Prepended to every text, as sentence-transformers' `prompt` ("" turns
    /// the model's default prompt off).
    public var prompt: String?
    /// A prompt stored in the model by name (sentence-transformers'
    /// `prompt_name`); an unknown name is refused at open, naming the stored ones.
    public var promptName: String?
    /// Long texts as windows of `maxSeqLength` tokens sharing this many
    /// tokens, averaged (nil: truncation, the default). Must be less than
    /// `maxSeqLength - 2`.
    public var windowOverlap: Int?
    /// Ranges of `.int8`/`.uint8` output, overriding those stored in the file.
    public var outputRanges: OutputRanges?
    /// Progress of every encoding call; returning false cancels the call.
    public var progress: ProgressHandler?

    public init(threads: Int? = nil, maxSeqLength: Int? = nil, normalize: Bool? = nil,
                verifyChecksums: Bool? = nil, prepackWeights: Bool? = nil, precision: Precision? = nil,
                dimensions: Int? = nil, prompt: String? = nil, promptName: String? = nil,
                windowOverlap: Int? = nil, outputRanges: OutputRanges? = nil,
                progress: ProgressHandler? = nil, matryoshka: String? = nil) {
        self.threads = threads
        self.maxSeqLength = maxSeqLength
        self.normalize = normalize
        self.verifyChecksums = verifyChecksums
        self.prepackWeights = prepackWeights
        self.precision = precision
        self.dimensions = dimensions
        self.prompt = prompt
        self.promptName = promptName
        self.windowOverlap = windowOverlap
        self.outputRanges = outputRanges
        self.progress = progress
        self.matryoshka = matryoshka
    }
}

/// What a call does with a text longer than `maxSeqLength` tokens.
public enum Truncation: Int32, Sendable {
    /// Keep the first tokens (the default).
    case right = 0
    /// Keep the last tokens.
    case left = 1
    /// Fail the call with `.limitExceeded`, naming the text.
    case refuse = 2
}

/// Options of one call on an open model (no second open for queries and
/// documents). The default value changes nothing: the vectors are then
/// bit for bit those of the plain call.
public struct CallOptions: Sendable, Equatable {
    /// Overrides the model's L2 normalization; nil keeps it.
    public var normalize: Bool?
    /// The first components of the model's full vector (renormalized when
    /// normalizing); nil: the model's `dim`.
    public var dimensions: Int?
    /// Replaces the prompt the model was opened with ("" = none); nil keeps it.
    public var prompt: String?
    /// One of the model's stored prompts; nil: unset.
    public var promptName: String?
    /// Truncation of texts longer than `maxSeqLength`.
    public var truncation: Truncation

    public init(normalize: Bool? = nil, dimensions: Int? = nil, prompt: String? = nil,
                promptName: String? = nil, truncation: Truncation = .right) {
        self.normalize = normalize
        self.dimensions = dimensions
        self.prompt = prompt
        self.promptName = promptName
        self.truncation = truncation
    }

    /// Calls `body` with these options as an `embd_call_options` (freed after).
    func withC<R>(_ body: (OpaquePointer) throws -> R) throws -> R {
        guard let o = embd_call_options_new() else { throw EmbedderError.last(EmbedderError.Status.outOfMemory.rawValue) }
        defer { embd_call_options_free(o) }
        if let n = normalize { try check(embd_call_options_set_normalize(o, n ? 1 : 0)) }
        if let d = dimensions { try check(embd_call_options_set_dimensions(o, try nonNegative(d, "dimensions"))) }
        try withOptionalCString(prompt, "prompt") { p in
            if p != nil { try check(embd_call_options_set_prompt(o, p)) }
        }
        try withOptionalCString(promptName, "prompt name") { p in
            if p != nil { try check(embd_call_options_set_prompt_name(o, p)) }
        }
        try check(embd_call_options_set_truncation(o, truncation.rawValue))
        return try body(o)
    }
}

/// Whether a call encodes queries or documents (`embd_task`). It picks the
/// model's stored prompt of that name (unless the call options set one), an
/// inference-free SPLADE's query weights, and ColBERT's query or document
/// markers.
public enum EncodingTask: Int32, Sendable {
    /// Neither: ColBERT encodes documents, a router takes its default route.
    case unspecified = 0
    /// Queries (sentence-transformers' `encode_query`).
    case query = 1
    /// Documents (sentence-transformers' `encode_document`).
    case document = 2
}

/// Element type of quantized vectors (`embd_output_precision`), as
/// sentence-transformers' `quantize_embeddings`.
public enum OutputPrecision: Int32, Sendable, CaseIterable, CustomStringConvertible {
    /// Float components (what `encode` returns).
    case float32 = 0
    /// One Int8 per component: the `.uint8` bucket minus 128. Needs ranges.
    case int8 = 1
    /// One byte per component: the bucket `clamp(floor((x - min) / step), 0, 255)`
    /// of the dimension's range. Needs ranges (`ModelOptions.outputRanges` or stored in the file).
    case uint8 = 2
    /// The `.ubinary` bytes minus 128, as Int8.
    case binary = 3
    /// The bits x > 0, 8 per byte, first component in the most significant bit (numpy.packbits).
    case ubinary = 4

    /// "float32", "int8", "uint8", "binary", "ubinary" (`embd_output_precision_name`).
    public var description: String {
        embd_output_precision_name(rawValue).map { String(cString: $0) } ?? "OutputPrecision(\(rawValue))"
    }
}

/// Options of `Reranker.init(path:options:)`.
public struct RerankerOptions: Sendable {
    /// Worker threads per call (0 = all CPUs).
    public var threads: Int?
    /// Tokens of a pair, special tokens included (CrossEncoder's `max_length`; 0 = the model's).
    public var maxLength: Int?
    /// Arithmetic of the dense layers; nil: the file's own.
    public var precision: Precision?
    /// Verify the file's checksums at open (default true).
    public var verifyChecksums: Bool?
    /// Repack the weights at open (default true).
    public var prepackWeights: Bool?
    /// An LLM reranker's instruction for every call (Qwen3-Reranker); refused by other cross-encoders.
    public var prompt: String?
    /// Progress of every scoring call; returning false cancels it.
    public var progress: ProgressHandler?

    public init(threads: Int? = nil, maxLength: Int? = nil, precision: Precision? = nil,
                verifyChecksums: Bool? = nil, prepackWeights: Bool? = nil, prompt: String? = nil,
                progress: ProgressHandler? = nil) {
        self.threads = threads
        self.maxLength = maxLength
        self.precision = precision
        self.verifyChecksums = verifyChecksums
        self.prepackWeights = prepackWeights
        self.prompt = prompt
        self.progress = progress
    }
}
