// Sparse and multi-vector outputs against the reference folders of
// shared/reference/architectures (opened directly), with the numbers of
// sentence-transformers / PyLate / FlagEmbedding in <name>_reference.jsonl,
// as examples/go/outputs_test.go.
import Foundation
import XCTest
@testable import Embedder

struct SparseJSON: Decodable {
    let indices: [UInt32]
    let values: [Double]
}

struct OutputLine: Decodable {
    let text: String
    let sparse: SparseJSON?
    let query_sparse: SparseJSON?
    let document_sparse: SparseJSON?
    let query_vectors: [[Double]]?
    let document_vectors: [[Double]]?
    let lexical_weights: [String: Double]?
    let colbert_vecs: [[Double]]?
    let dense: [Double]?
}

final class OutputTests: XCTestCase {
    func open(_ name: String) throws -> Model {
        try Model(path: try Fixtures.reference("architectures/" + name), options: ModelOptions(threads: 2))
    }

    func lines(_ name: String, _ n: Int = 0) throws -> [OutputLine] {
        let l: [OutputLine] = try Fixtures.jsonl(try Fixtures.reference("architectures/\(name)_reference.jsonl"), limit: n)
        if n > 0 { XCTAssertEqual(l.count, n) }
        return l
    }

    /// The same ids, each weight within 1e-5 of the reference's largest weight.
    func checkSparse(_ got: SparseVector, _ want: SparseJSON, _ what: String) {
        XCTAssertEqual(Array(got.indices), want.indices, what)
        guard Array(got.indices) == want.indices else { return }
        let top = want.values.map(abs).max() ?? 0
        for (g, w) in zip(got.values, want.values) { XCTAssertEqual(Double(g), w, accuracy: 1e-5 * top, what) }
    }

    /// The same vector count, each vector with cosine >= 0.99999.
    func checkMulti(_ got: MultiVector, _ want: [[Double]], _ what: String) throws {
        XCTAssertEqual(got.count, want.count, what)
        guard got.count == want.count else { return }
        for (i, w) in want.enumerated() {
            XCTAssertEqual(got.dim, w.count, what)
            XCTAssertGreaterThanOrEqual(try cosineSimilarity(got[i], w.map { Float($0) }), 0.99999, "\(what) vector \(i)")
        }
    }

    func testSpladeSparse() throws {
        let m = try open("splade-tiny")
        XCTAssertEqual(m.outputs, ["sparse"])
        XCTAssertTrue(m.hasOutput(OutputName.sparse))
        XCTAssertFalse(m.hasOutput(OutputName.multiVector))
        XCTAssertFalse(m.hasOutput("nope"))
        XCTAssertEqual(m.multiVectorDim, 0)
        let refs = try lines("splade-tiny", 5)
        let texts = refs.map(\.text)
        let got = try m.encodeSparse(texts)
        XCTAssertEqual(got.count, refs.count)
        for (i, r) in refs.enumerated() { checkSparse(got[i], try XCTUnwrap(r.sparse), "line \(i + 1)") }
        // A document task changes nothing on a plain SPLADE; a text alone is the same as in the batch.
        XCTAssertEqual(try m.encodeSparse([texts[1]], task: .document)[0], got[1])
        // topK 1: the largest weight of each text.
        let top = try m.encodeSparse(texts, topK: 1)
        for i in 0..<refs.count {
            let best = got[i].values.indices.max(by: { got[i].values[$0] < got[i].values[$1] })!
            XCTAssertEqual(top[i].count, 1)
            XCTAssertEqual(top[i].indices.first, got[i].indices[best])
            XCTAssertEqual(top[i].values.first, got[i].values[best])
        }
        // Dot of a vector with itself: its squared norm.
        let sq = got[0].values.map { Double($0) * Double($0) }.reduce(0, +)
        XCTAssertEqual(Double(got[0].dot(got[0])), sq, accuracy: 1e-5 * sq)
        XCTAssertEqual(status { try m.encodeSparse(texts, topK: -1) }, .invalidArgument)
    }

    func testSpladeInferenceFree() throws {
        let m = try open("splade-inference-free-tiny")
        let refs = try lines("splade-inference-free-tiny", 5)
        let q = try m.encodeSparse(refs.map(\.text), task: .query)
        let d = try m.encodeSparse(refs.map(\.text), task: .document)
        for (i, r) in refs.enumerated() {
            checkSparse(q[i], try XCTUnwrap(r.query_sparse), "query line \(i + 1)")
            checkSparse(d[i], try XCTUnwrap(r.document_sparse), "document line \(i + 1)")
        }
    }

    func testColbertMultiVector() throws {
        let m = try open("colbert-tiny")
        XCTAssertEqual(m.outputs, ["multi-vector"])
        XCTAssertEqual(m.multiVectorDim, 32)
        XCTAssertEqual(m.info.multiVectorDim, 32)
        let refs = try lines("colbert-tiny", 5)
        let texts = refs.map(\.text)
        let q = try m.encodeMultiVector(texts, task: .query)
        let d = try m.encodeMultiVector(texts, task: .document)
        XCTAssertEqual(q.count, refs.count)
        for (i, r) in refs.enumerated() {
            XCTAssertEqual(q[i].dim, 32)
            try checkMulti(q[i], try XCTUnwrap(r.query_vectors), "query line \(i + 1)")
            if let dv = r.document_vectors, !dv.isEmpty { try checkMulti(d[i], dv, "document line \(i + 1)") }
        }
        // maxSim against a direct computation.
        var want = 0.0
        for qv in q[1] {
            var best = -Double.infinity
            for dv in d[1] { best = max(best, zip(qv, dv).map { Double($0) * Double($1) }.reduce(0, +)) }
            want += best
        }
        XCTAssertEqual(Double(try q[1].maxSim(d[1])), want, accuracy: 1e-4 * abs(want))
        // The unspecified task encodes documents.
        XCTAssertEqual(try m.encodeMultiVector([texts[1]])[0], d[1])
    }

    func testBgeM3AllOutputs() throws {
        let m = try open("bgem3-tiny")
        XCTAssertEqual(m.outputs, ["dense", "sparse", "multi-vector"])
        let refs = try lines("bgem3-tiny")
        let withLexical = refs.filter { $0.lexical_weights != nil }
        XCTAssertFalse(withLexical.isEmpty)
        let got = try m.encodeSparse(withLexical.map(\.text))
        for (i, r) in withLexical.enumerated() {
            let ids = r.lexical_weights!.keys.compactMap { UInt32($0) }.sorted()
            let want = SparseJSON(indices: ids, values: ids.map { r.lexical_weights![String($0)]! })
            checkSparse(got[i], want, "lexical \(i)")
        }
        let first = Array(refs.prefix(5))
        let mv = try m.encodeMultiVector(first.map(\.text))
        for (i, r) in first.enumerated() {
            if let cv = r.colbert_vecs { try checkMulti(mv[i], cv, "colbert_vecs line \(i + 1)") }
        }
        let dense = try m.encode(first.map(\.text))
        for (i, r) in first.enumerated() {
            if let dv = r.dense { XCTAssertLessThanOrEqual(maxAbsDiff(dense[i], dv), 1e-5, "dense line \(i + 1)") }
        }
    }

    func testOutputErrors() throws {
        let m = try open("splade-tiny")
        let e = error { try m.encode(["hello"]) }
        XCTAssertEqual(e?.status, .unsupported)
        XCTAssertTrue(e?.message.contains("sparse") ?? false, "\(String(describing: e))")
        XCTAssertEqual(status { try m.encodeMultiVector(["hello"], task: .query) }, .unsupported)
        XCTAssertEqual(status { try openMinilm().encodeSparse(["hello"]) }, .unsupported)
        XCTAssertEqual(try m.encodeSparse([]), [])
        XCTAssertThrowsError(try MultiVector(dim: 2, data: [1, 2]).maxSim(MultiVector(dim: 3, data: [1, 2, 3])))
    }
}
