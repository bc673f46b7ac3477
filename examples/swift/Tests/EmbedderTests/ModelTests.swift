// The dense API against minilm_reference.jsonl (the file the Go and Python
// tests use): open options, per-call options, token counts and truncation,
// token vectors, quantized outputs, prompts, windows, progress, precision,
// model info, errors, concurrency.
import Foundation
import XCTest
@testable import Embedder

final class ModelTests: XCTestCase {
    func testParity() throws {
        let refs = try minilmReferences()
        let m = try openMinilm(ModelOptions(threads: 2))
        XCTAssertEqual(m.dim, 384)
        XCTAssertEqual(m.maxSeqLength, 256)
        let got = try m.encode(refs.map(\.text))
        XCTAssertEqual(got.count, 3)
        XCTAssertEqual(got.data.count, 3 * 384)
        for (i, r) in refs.enumerated() {
            XCTAssertLessThanOrEqual(maxAbsDiff(got[i], r.embedding), 1e-4, r.text)
            XCTAssertEqual(got.info[i], TextInfo(tokens: r.input_ids.count, truncated: false))
            let one = try m.embed(r.text)
            XCTAssertLessThanOrEqual(maxAbsDiff(one, got[i].map { $0 }), 1e-6)
            XCTAssertEqual(try m.tokenize(r.text), r.input_ids, r.text)
            XCTAssertEqual(try m.countTokens(r.text), r.input_ids.count)
        }
        XCTAssertEqual(try m.embed(refs.map(\.text)), got.rows)
        XCTAssertEqual(try cosineSimilarity(got[0], got[0]), 1, accuracy: 1e-5)
        XCTAssertLessThan(try cosineSimilarity(got[0], got[1]), 0.9)
        XCTAssertEqual(status { try cosineSimilarity([1, 2], [1]) }, .invalidArgument)
    }

    func testStringsNeedNoNULAndBatchPaths() throws {
        let m = try openMinilm()
        // Embedded NUL bytes are ordinary text (BERT cleaning drops them); empty text is fine.
        let v = try m.encode(["a\u{0}b", "ab", "", String(repeating: "long text ", count: 500)])
        XCTAssertTrue(sameBits(v[0], v[1]))
        XCTAssertEqual(v.info[2].tokens, 2)
        XCTAssertEqual(v.info[3], TextInfo(tokens: 256, truncated: true))
        XCTAssertEqual(try m.tokenize(""), [101, 102])
        XCTAssertEqual(try m.tokenize("a\u{0}b"), try m.tokenize("ab"))
        XCTAssertEqual(try m.countTokens(String(repeating: "word ", count: 1000)), 256)
        XCTAssertEqual(try m.encode([]).count, 0)
        // More texts than the zero-copy limit take the one-buffer path: the
        // same vectors, also for a substring and a bridged-looking string.
        let many = (0..<(zeroCopyBatchLimit + 6)).map { "text number \($0) " + String(repeating: "é", count: $0 % 5) }
        let big = try m.encode(many)
        let small = try m.encode(Array(many.prefix(5)))
        for i in 0..<5 { XCTAssertTrue(sameBits(big[i], small[i]), "text \(i)") }
        XCTAssertTrue(sameBits(try m.embed(many[zeroCopyBatchLimit + 5]), big[zeroCopyBatchLimit + 5]))
        let sub = String("xx A classic mbox mailbox. yy".dropFirst(3).dropLast(3))
        XCTAssertTrue(sameBits(try m.embed(sub), try m.embed("A classic mbox mailbox.")))
    }

    func testOpenOptions() throws {
        let raw = try openMinilm(ModelOptions(maxSeqLength: 128, normalize: false, verifyChecksums: false,
                                              prepackWeights: false))
        XCTAssertEqual(raw.maxSeqLength, 128)
        XCTAssertGreaterThan(abs(norm(try raw.embed(refTexts[0])) - 1), 1e-3, "normalize false still gives a unit vector")
        XCTAssertFalse(raw.info.normalizes)
        // prepackWeights only changes the layout, never the numbers.
        let packed = try openMinilm(ModelOptions(maxSeqLength: 128, normalize: false))
        XCTAssertTrue(sameBits(try packed.embed(refTexts[1]), try raw.embed(refTexts[1])))
        // Out of the model's range: refused at open with a message naming the option.
        let e = error { try openMinilm(ModelOptions(maxSeqLength: 100_000)) }
        XCTAssertTrue(e?.status == .model || e?.status == .invalidArgument, "\(String(describing: e))")
        XCTAssertTrue(e?.message.contains("max_seq_length") ?? false, "\(String(describing: e))")
        XCTAssertEqual(status { try openMinilm(ModelOptions(threads: -1)) }, .invalidArgument)
        // threads only changes the speed.
        let four = try openMinilm(ModelOptions(threads: 4))
        XCTAssertLessThanOrEqual(maxAbsDiff(try four.embed(refTexts[2]), try openMinilm().embed(refTexts[2])), 1e-6)
    }

    func testDimensions() throws {
        let full = try openMinilm()
        let cut = try openMinilm(ModelOptions(threads: 1, dimensions: 32))
        XCTAssertEqual(cut.dim, 32)
        XCTAssertEqual(cut.info.dim, 32)
        let fv = try full.embed(refTexts[0])
        let cv = try cut.embed(refTexts[0])
        XCTAssertEqual(cv.count, 32)
        // The first 32 components of the full vector, scaled to unit length.
        let n = norm(fv[0..<32])
        for i in 0..<32 { XCTAssertEqual(Double(cv[i]), Double(fv[i]) / n, accuracy: 1e-6) }
        XCTAssertEqual(status { try openMinilm(ModelOptions(dimensions: 385)) }, .invalidArgument)
        XCTAssertEqual(status { try openMinilm(ModelOptions(dimensions: -1)) }, .invalidArgument)
    }

    func testTokenCountsAndTruncation() throws {
        let m = try openMinilm(ModelOptions(threads: 1, maxSeqLength: 16))
        let long = String(repeating: "cat ", count: 15)  // 15 words + [CLS]/[SEP] = 17 > 16
        let exact = String(repeating: "cat ", count: 14)
        let texts = ["The cat sits outside", long, exact, ""]
        let v = try m.encode(texts)
        XCTAssertEqual(v.info, [TextInfo(tokens: 6, truncated: false), TextInfo(tokens: 16, truncated: true),
                                TextInfo(tokens: 16, truncated: false), TextInfo(tokens: 2, truncated: false)])
        for (i, t) in texts.enumerated() { XCTAssertEqual(try m.countTokens(t), v.info[i].tokens) }
        XCTAssertEqual(try m.embed(texts), v.rows)
    }

    func testQuantized() throws {
        let m = try openMinilm()
        let texts = ["The cat sits outside", "A man is playing guitar"]
        let v = try m.encode(texts)
        let ub = try m.encodeQuantized(texts, precision: .ubinary)
        XCTAssertEqual(ub.rowLength, 48)
        XCTAssertEqual(ub.data.count, 96)
        XCTAssertEqual(ub.info[1].tokens, 7)
        let b = try m.encodeQuantized(texts, precision: .binary)
        for i in 0..<texts.count {
            let row = Array(ub[i]), srow = b.int8Row(i)
            for (k, x) in v[i].enumerated() {
                XCTAssertEqual((row[k / 8] >> (7 - UInt8(k % 8))) & 1 == 1, x > 0, "text \(i) component \(k)")
            }
            for k in 0..<row.count { XCTAssertEqual(Int(srow[k]), Int(row[k]) - 128) }
        }
        // int8/uint8 need ranges: none in this file.
        XCTAssertFalse(m.info.hasOutputRanges)
        XCTAssertEqual(status { try m.encodeQuantized(texts, precision: .int8) }, .invalidArgument)
        XCTAssertEqual(status { try m.encodeQuantized(texts, precision: .float32) }, .invalidArgument)
        let lo = [Float](repeating: -0.1, count: 384), hi = [Float](repeating: 0.1, count: 384)
        let r = try openMinilm(ModelOptions(threads: 1, outputRanges: OutputRanges(min: lo, max: hi)))
        XCTAssertTrue(r.info.hasOutputRanges)
        let u8 = try r.encodeQuantized(texts, precision: .uint8)
        let i8 = try r.encodeQuantized(texts, precision: .int8)
        XCTAssertEqual(u8.rowLength, 384)
        for i in 0..<texts.count {
            let u = Array(u8[i]), s = i8.int8Row(i)
            for (k, x) in v[i].enumerated() {
                XCTAssertEqual(Int(s[k]), Int(u[k]) - 128)
                if x < -0.1 { XCTAssertEqual(u[k], 0) }
                if x > 0.1 { XCTAssertEqual(u[k], 255) }
            }
        }
        let ten = OutputRanges(min: Array(lo.prefix(10)), max: Array(hi.prefix(10)))
        XCTAssertEqual(status { try openMinilm(ModelOptions(outputRanges: ten)) }, .invalidArgument)
        XCTAssertEqual(OutputPrecision.ubinary.description, "ubinary")
        XCTAssertEqual(OutputPrecision.allCases.map(\.description), ["float32", "int8", "uint8", "binary", "ubinary"])
    }

    func testPrompts() throws {
        let plain = try openMinilm()
        let m = try openMinilm(ModelOptions(threads: 1, prompt: "query: "))
        let a = try m.encode(["The cat sits outside"])
        XCTAssertTrue(sameBits(a[0], try plain.embed("query: The cat sits outside")))
        XCTAssertEqual(a.info[0].tokens, 8, "prompt tokens included")
        let e = error { try openMinilm(ModelOptions(promptName: "query")) }
        XCTAssertEqual(e?.status, .invalidArgument)
        XCTAssertTrue(e?.message.contains("stores none") ?? false, "\(String(describing: e))")
        XCTAssertEqual(status { try openMinilm(ModelOptions(prompt: "a\u{0}b")) }, .invalidArgument)
    }

    /// Prompt names: Qwen3-Embedding's stored prompts (the reference folder,
    /// opened directly) against qwen3-embedding-tiny_prompt_reference.jsonl,
    /// as python/tests/test_families.py.
    func testPromptNames() throws {
        let folder = try Fixtures.reference("architectures/qwen3-embedding-tiny")
        let ref: [EmbeddingLine] = try Fixtures.jsonl(try Fixtures.reference("architectures/qwen3-embedding-tiny_prompt_reference.jsonl"))
        let groups = Dictionary(grouping: ref, by: { $0.prompt_name ?? "query" })
        XCTAssertFalse(groups.isEmpty)
        for (name, rows) in groups {
            let m = try Model(path: folder, options: ModelOptions(threads: 2, promptName: name))
            for r in rows { XCTAssertEqual(try m.tokenize(r.text), r.input_ids, "\(name): \(r.text)") }
            let got = try m.encode(rows.map(\.text))
            for (i, r) in rows.enumerated() { XCTAssertLessThanOrEqual(maxAbsDiff(got[i], r.embedding), 1e-5, name) }
            // The same prompt per call, on a model opened without it.
            let plain = try Model(path: folder, options: ModelOptions(threads: 2, prompt: ""))
            let perCall = try plain.encode(rows.map(\.text), options: CallOptions(promptName: name))
            for (i, r) in rows.enumerated() { XCTAssertLessThanOrEqual(maxAbsDiff(perCall[i], r.embedding), 1e-5, name) }
        }
        let e = error { try Model(path: folder, options: ModelOptions(promptName: "no-such-prompt")) }
        XCTAssertEqual(e?.status, .invalidArgument)
        XCTAssertTrue(e?.message.contains("query") ?? false, "names the stored prompts: \(String(describing: e))")
    }

    func testCallOptions() throws {
        let texts = ["The cat sits outside", "A man is playing guitar", ""]
        let m = try openMinilm()
        let plain = try m.encode(texts)
        // The default value changes nothing.
        let same = try m.encode(texts, options: CallOptions())
        XCTAssertTrue(sameRows(same, plain))
        XCTAssertEqual(same.info[0].tokens, 6)
        // Each option equals a model opened with it.
        let cases: [(String, CallOptions, ModelOptions)] = [
            ("normalize", CallOptions(normalize: false), ModelOptions(threads: 1, normalize: false)),
            ("dimensions", CallOptions(dimensions: 32), ModelOptions(threads: 1, dimensions: 32)),
            ("prompt", CallOptions(prompt: "query: "), ModelOptions(threads: 1, prompt: "query: ")),
        ]
        for (name, call, open) in cases {
            let want = try openMinilm(open).encode(texts)
            XCTAssertTrue(sameRows(try m.encode(texts, options: call), want), name)
        }
        // Truncation: refused with .limitExceeded, or cut from either end.
        let long = "the first words " + String(repeating: "cat ", count: 400) + "and the last"
        let e = error { try m.encode([long], options: CallOptions(truncation: .refuse)) }
        XCTAssertEqual(e?.status, .limitExceeded)
        let left = try m.encode([long], options: CallOptions(truncation: .left))
        XCTAssertEqual(left.info[0], TextInfo(tokens: 256, truncated: true))
        XCTAssertFalse(sameBits(left[0], try m.embed(long)))
        XCTAssertEqual(status { try m.encode(texts, options: CallOptions(dimensions: 999)) }, .invalidArgument)
        XCTAssertEqual(status { try m.encode(texts, options: CallOptions(dimensions: -1)) }, .invalidArgument)
        XCTAssertEqual(status { try m.encode(texts, options: CallOptions(prompt: "p", promptName: "query")) },
                       .invalidArgument)
    }

    func testWindows() throws {
        let long = String(repeating: "cat ", count: 40).trimmingCharacters(in: .whitespaces)  // 40 tokens > 14 per window
        let w = try openMinilm(ModelOptions(threads: 1, maxSeqLength: 16, windowOverlap: 4))
        let p = try openMinilm(ModelOptions(threads: 1, maxSeqLength: 16))
        let a = try w.encode([long, "The cat sits outside"])
        let b = try p.encode([long, "The cat sits outside"])
        XCTAssertEqual(a.info[0], TextInfo(tokens: 42, truncated: false))
        XCTAssertEqual(b.info[0], TextInfo(tokens: 16, truncated: true))
        XCTAssertFalse(sameBits(a[0], b[0]), "windowed vector equals the truncated one")
        XCTAssertTrue(sameBits(a[1], b[1]), "a text that fits one window changed")
        XCTAssertEqual(status { try openMinilm(ModelOptions(maxSeqLength: 16, windowOverlap: 14)) }, .invalidArgument)
        // Token vectors and per-call options are refused on a windowed model.
        XCTAssertEqual(status { try w.encodeTokens(["x"]) }, .unsupported)
    }

    func testProgressAndCancellation() throws {
        let texts = (0..<200).map { "sentence number \($0) about cats" }
        let log = ProgressLog()
        let m = try openMinilm(ModelOptions(threads: 2, progress: { done, total in log.record(done, total) }))
        let want = try openMinilm(ModelOptions(threads: 2)).encode(texts)
        let got = try m.encode(texts)
        XCTAssertTrue(sameRows(got, want), "vectors differ with a progress handler")
        let calls = log.calls
        XCTAssertGreaterThanOrEqual(calls.count, 2)
        XCTAssertEqual(calls.last?.0, texts.count)
        XCTAssertTrue(calls.allSatisfy { $0.1 == texts.count })
        XCTAssertEqual(calls.map(\.0), calls.map(\.0).sorted(), "done never decreases")
        // Returning false stops the call.
        log.reset(stopAt: 1)
        let e = error { try m.encode(texts) }
        XCTAssertEqual(e?.status, .cancelled)
        XCTAssertEqual(log.calls.count, 1)
        do {
            _ = try m.encode(texts)
            XCTFail("not cancelled")
        } catch EmbedderError.Status.cancelled {
            // the status pattern matches
        }
    }

    func testPrecision() throws {
        XCTAssertEqual(try openMinilm().precision, .f32, "the file's own: an f32 file")
        for p in Precision.allCases {
            let m = try openMinilm(ModelOptions(threads: 1, precision: p))
            XCTAssertEqual(m.precision, p)
            XCTAssertEqual(m.info.precision, p)
            let v = try m.embed(refTexts[0])
            XCTAssertEqual(v.count, 384)
            XCTAssertEqual(norm(v), 1, accuracy: 1e-3)
        }
        XCTAssertEqual(Precision.allCases.map(\.description), ["f32", "bf16", "int8"])
        XCTAssertEqual(Precision(name: "BF16"), .bf16)
        XCTAssertNil(Precision(name: "fp16"))
    }

    func testModelInfo() throws {
        let info = try openMinilm().info
        XCTAssertEqual(info.dim, 384)
        XCTAssertEqual(info.maxSeqLength, 256)
        XCTAssertEqual(info.numLayers, 6)
        XCTAssertEqual(info.numHeads, 12)
        XCTAssertEqual(info.vocabSize, 30522)
        XCTAssertEqual(info.pooling, "mean")
        XCTAssertTrue(info.normalizes)
        XCTAssertEqual(info.precision, .f32)
        XCTAssertEqual(info.outputs, ["dense"])
        XCTAssertEqual(info.multiVectorDim, 0)
        XCTAssertFalse(info.name.isEmpty)
        XCTAssertEqual(embedderVersion.split(separator: ".").count, 3)
    }

    func testErrors() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("embedder-swift-\(getpid())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let missing = dir.appendingPathComponent("missing.weights").path
        do {
            _ = try Model(path: missing)
            XCTFail("opened a missing file")
        } catch EmbedderError.Status.notFound {
            // matched by status
        }
        let e = error { try Model(path: missing) }
        XCTAssertEqual(e?.status, .notFound)
        XCTAssertEqual(e?.status.rawValue, 20)
        XCTAssertTrue(e?.message.contains("missing.weights") ?? false)
        XCTAssertTrue(e.map { "\($0)" }?.contains("(status 20)") ?? false)
        let junk = dir.appendingPathComponent("junk.weights").path
        try String(repeating: "not a model ", count: 100).write(toFile: junk, atomically: true, encoding: .utf8)
        XCTAssertEqual(status { try Model(path: junk) }, .unknownFormat)
        XCTAssertEqual(status { try Reranker(path: try Fixtures.minilm()) }, .model)
        XCTAssertEqual(EmbedderError.Status(rawValue: 12345).description, "unknown status")
        XCTAssertTrue(EmbedderError.Status.notFound.description.contains("not found"))
    }

    /// One model from many threads at once: the same vectors, and each
    /// thread's failure carries its own message (read on its own thread).
    func testConcurrentUse() throws {
        let m = try openMinilm()
        let texts = refTexts + ["The cat sits outside", "A man is playing guitar", ""]
        let want = try m.encode(texts)
        let failures = Failures()
        DispatchQueue.concurrentPerform(iterations: 16) { g in
            for r in 0..<3 {
                let i = (g + r) % texts.count
                do {
                    if !sameBits(try m.embed(texts[i]), want[i]) { failures.add("thread \(g) text \(i) differs") }
                    let words = 300 + g * 7 + r
                    let long = String(repeating: "cat ", count: words)
                    do {
                        _ = try m.encode(["ok", long], options: CallOptions(truncation: .refuse))
                        failures.add("thread \(g): a long text was not refused")
                    } catch let e as EmbedderError {
                        if e.status != .limitExceeded || !e.message.contains("\(words + 2)") {
                            failures.add("thread \(g): \(e) does not name its \(words + 2) tokens")
                        }
                    }
                } catch {
                    failures.add("thread \(g): \(error)")
                }
            }
        }
        XCTAssertEqual(failures.all, [])
    }

    /// Token vectors: un-pooled, one per reference id; their normalized mean is the reference vector.
    func testTokenVectors() throws {
        let m = try openMinilm(ModelOptions(threads: 2))
        let refs = try minilmReferences()
        let tv = try m.encodeTokens(refs.map(\.text))
        XCTAssertEqual(tv.count, refs.count)
        for (i, r) in refs.enumerated() {
            XCTAssertEqual(tv[i].count, r.input_ids.count)
            XCTAssertEqual(tv.info[i].tokens, r.input_ids.count)
            var mean = [Double](repeating: 0, count: 384)
            for v in tv[i] {
                XCTAssertEqual(v.count, 384)
                for (j, x) in v.enumerated() { mean[j] += Double(x) }
            }
            let n = mean.map { $0 * $0 }.reduce(0, +).squareRoot()
            for j in 0..<384 { XCTAssertEqual(mean[j] / n, r.embedding[j], accuracy: 1e-5) }
        }
        // A text alone gets the same vectors; dimensions cut each vector.
        let alone = try m.encodeTokens([refs[1].text], options: CallOptions(dimensions: 16))
        XCTAssertEqual(alone.dim, 16)
        for (k, v) in alone[0].enumerated() { XCTAssertTrue(sameBits(v, tv[1][k].prefix(16)), "token \(k)") }
        XCTAssertEqual(status { try m.encodeTokens(["x"], options: CallOptions(dimensions: 1000)) }, .invalidArgument)
        XCTAssertEqual(try m.encodeTokens([]).count, 0)
    }

    /// all-mpnet-base-v2 (scripts/fetch_mpnet.sh) against mpnet_reference.jsonl.
    func testMPNet() throws {
        let path = try Fixtures.model("EMBD_MPNET_MODEL", "all-mpnet-base-v2.weights", hint: "scripts/fetch_mpnet.sh")
        let all: [EmbeddingLine] = try Fixtures.jsonl(try Fixtures.reference("mpnet_reference.jsonl"))
        let m = try Model(path: path, options: ModelOptions(threads: 2))
        XCTAssertEqual(m.dim, 768)
        XCTAssertEqual(m.maxSeqLength, 384)
        let got = try m.encode(refTexts)
        for (i, t) in refTexts.enumerated() {
            guard let r = all.first(where: { $0.text == t }) else { return XCTFail("\(t) not in the reference") }
            XCTAssertLessThanOrEqual(maxAbsDiff(got[i], r.embedding), 1e-4, t)
            XCTAssertEqual(try m.tokenize(t), r.input_ids)
        }
    }

    /// The static models of tests/data/static.tsv in sentence-transformers'
    /// behaviour (what their folders open as: they carry a modules.json), on
    /// every line of its reference: ids identical, vectors within 1e-5 (the
    /// zero vector for a text without tokens), alone the same bits as in the
    /// batch. model2vec's behaviour is chosen at conversion (C, Go, Rust and
    /// Python test it).
    func testStaticModels() throws {
        let rows = try table("static.tsv").filter { $0["behaviour"] == "sentence-transformers" }
        XCTAssertFalse(rows.isEmpty)
        for v in rows {
            let rel = v["folder"] ?? ""
            let refs: [EmbeddingLine] = try Fixtures.jsonl(try Fixtures.reference(v["reference"] ?? ""))
            XCTAssertEqual(refs.count, Int(v["lines"] ?? ""), rel)
            let m = try Model(path: try Fixtures.reference(rel), options: ModelOptions(threads: 2))
            XCTAssertEqual(m.dim, Int(v["dim"] ?? ""), rel)
            XCTAssertEqual(m.maxSeqLength, Int(v["max_tokens"] ?? ""), rel)
            let got = try m.encode(refs.map(\.text))
            var worst = 0.0
            for (i, r) in refs.enumerated() {
                worst = max(worst, maxAbsDiff(got[i], r.embedding))
                XCTAssertEqual(try m.tokenize(r.text), r.input_ids, "\(rel) line \(i + 1)")
                XCTAssertTrue(sameBits(try m.embed(r.text), got[i]), "\(rel) line \(i + 1) alone")
            }
            XCTAssertLessThanOrEqual(worst, 1e-5, rel)
        }
    }

    /// Every model of tests/data/families.tsv through the same API (the
    /// folders open directly): on every line of its reference ids identical,
    /// vectors within 1e-5, a text alone the same bits as in the batch; the
    /// ids of its tokenizer case file; its prompts by name.
    func testFamilies() throws {
        let families = try Family.all()
        XCTAssertFalse(families.isEmpty)
        for fam in families {
            let rel = fam.folder
            let refs: [EmbeddingLine] = try Fixtures.jsonl(try Fixtures.reference(rel + "_reference.jsonl"))
            XCTAssertEqual(refs.count, fam.lines, rel)
            let m = try Model(path: try Fixtures.reference(rel), options: ModelOptions(threads: 2))
            XCTAssertEqual(m.dim, fam.dim, rel)
            XCTAssertEqual(m.maxSeqLength, fam.maxTokens, rel)
            let got = try m.encode(refs.map(\.text))
            var worst = 0.0
            for (i, r) in refs.enumerated() {
                worst = max(worst, maxAbsDiff(got[i], r.embedding))
                XCTAssertEqual(try m.tokenize(r.text), r.input_ids, "\(rel) line \(i + 1)")
            }
            XCTAssertLessThanOrEqual(worst, 1e-5, rel)
            for i in [0, 1, refs.count / 2, refs.count - 1] {
                XCTAssertTrue(sameBits(try m.embed(refs[i].text), got[i]), "\(rel) line \(i + 1) alone")
            }
            if let cases = fam.cases {
                // Ids without truncation: a longer text gives its first
                // max_seq_length - 1 ids and the closing special token.
                let lines: [ReferenceLine] = try Fixtures.jsonl(try Fixtures.reference(cases))
                XCTAssertEqual(lines.count, fam.caseLines, cases)
                for (i, c) in lines.enumerated() {
                    var want = c.input_ids ?? []
                    if want.count > m.maxSeqLength { want = Array(want[..<(m.maxSeqLength - 1)]) + [want[want.count - 1]] }
                    XCTAssertEqual(try m.tokenize(c.text), want, "\(cases) line \(i + 1)")
                }
            }
            if fam.promptLines > 0 {
                let rows: [ReferenceLine] = try Fixtures.jsonl(try Fixtures.reference(rel + "_prompt_reference.jsonl"))
                XCTAssertEqual(rows.count, fam.promptLines, rel)
                let groups = Dictionary(grouping: rows, by: { $0.prompt_name ?? fam.promptDefault ?? "" })
                for (name, rows) in groups {
                    XCTAssertFalse(name.isEmpty, "\(rel): a line without prompt_name and no default prompt")
                    let p = try Model(path: try Fixtures.reference(rel), options: ModelOptions(threads: 2, promptName: name))
                    let got = try p.encode(rows.map(\.text))
                    for (i, r) in rows.enumerated() {
                        if let ids = r.input_ids { XCTAssertEqual(try p.tokenize(r.text), ids, "\(rel) \(name): \(r.text)") }
                        XCTAssertLessThanOrEqual(maxAbsDiff(got[i], r.embedding ?? []), 1e-5, "\(rel) \(name)")
                    }
                }
            }
        }
    }
}

/// Progress calls, recorded under a lock (the handler is @Sendable).
final class ProgressLog: @unchecked Sendable {
    private let lock = NSLock()
    private var _calls: [(Int, Int)] = []
    private var stopAt = Int.max

    func record(_ done: Int, _ total: Int) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        _calls.append((done, total))
        return done < stopAt
    }

    func reset(stopAt: Int) {
        lock.lock()
        _calls = []
        self.stopAt = stopAt
        lock.unlock()
    }

    var calls: [(Int, Int)] {
        lock.lock()
        defer { lock.unlock() }
        return _calls
    }
}

final class Failures: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [String] = []
    func add(_ s: String) {
        lock.lock()
        items.append(s)
        lock.unlock()
    }
    var all: [String] {
        lock.lock()
        defer { lock.unlock() }
        return items
    }
}
