// The reranker against the reference files the Go tests use
// (examples/go/reranker_test.go): every line's ids, token types, scores and
// logits; the rank files; an LLM reranker's prompt (Qwen3-Reranker).
import Foundation
import XCTest
@testable import Embedder

struct PairLine: Decodable {
    let query: String
    let passage: String
    let input_ids: [UInt32]
    let token_type_ids: [UInt32]?
    let logit: Double
    let score: Double
    let prompt: String?
}

struct RankFile: Decodable {
    struct Entry: Decodable {
        let corpus_id: Int
        let score: Double
    }
    let query: String
    let documents: [String]
    let ranking: [Entry]
}

final class RerankerTests: XCTestCase {
    /// minilm-reranker (scripts/fetch_reranker.sh), at the reference's max_length 256.
    func minilmReranker() throws -> Reranker {
        let p = try Fixtures.model("EMBD_RERANK_MODEL", "minilm-reranker.weights", hint: "scripts/fetch_reranker.sh")
        return try Reranker(path: p, options: RerankerOptions(threads: 2, maxLength: 256))
    }

    func folderReranker(_ rel: String) throws -> Reranker {
        try Reranker(path: try Fixtures.reference(rel), options: RerankerOptions(threads: 2))
    }

    /// Every line: ids and types identical (0 where the file has none; not compared with
    /// `types: false`, for a model without a token type table), score within 1e-5, logit within 1e-4.
    func checkReference(_ r: Reranker, _ rel: String, _ wantLines: Int, types: Bool = true) throws {
        let lines: [PairLine] = try Fixtures.jsonl(try Fixtures.reference(rel + "_reference.jsonl"))
        XCTAssertEqual(lines.count, wantLines, rel)
        for (i, l) in lines.enumerated() {
            let (ids, got) = try r.tokenize(query: l.query, passage: l.passage)
            XCTAssertEqual(ids, l.input_ids, "\(rel) line \(i + 1)")
            if types {
                XCTAssertEqual(got, l.token_type_ids ?? [UInt32](repeating: 0, count: l.input_ids.count), "\(rel) line \(i + 1)")
            }
        }
        let got = try r.score(lines.map { Pair(query: $0.query, passage: $0.passage) })
        var worstS = 0.0, worstL = 0.0
        for (i, l) in lines.enumerated() {
            worstS = max(worstS, abs(Double(got.scores[i]) - l.score))
            worstL = max(worstL, abs(Double(got.logits[i]) - l.logit))
            XCTAssertEqual(got.info[i].tokens, l.input_ids.count, "\(rel) line \(i + 1)")
        }
        XCTAssertLessThanOrEqual(worstS, 1e-5, rel)
        XCTAssertLessThanOrEqual(worstL, 1e-4, rel)
    }

    /// rank gives <name>_rank.json's order and scores (1e-5); a document
    /// whose text another repeats may take that one's place.
    @discardableResult
    func checkRank(_ r: Reranker, _ rel: String) throws -> RankFile {
        let rf: RankFile = try Fixtures.json(try Fixtures.reference(rel + "_rank.json"))
        let got = try r.rank(rf.query, documents: rf.documents)
        XCTAssertEqual(got.count, rf.ranking.count)
        for (i, w) in rf.ranking.enumerated() where i < got.count {
            let same = got[i].index == w.corpus_id || rf.documents[got[i].index] == rf.documents[w.corpus_id]
            XCTAssertTrue(same, "\(rel) rank \(i): \(got[i].index), want \(w.corpus_id)")
            XCTAssertEqual(Double(got[i].score), w.score, accuracy: 1e-5, "\(rel) rank \(i)")
        }
        return rf
    }

    func testMinilmRerankerEveryLineAndRank() throws {
        let r = try minilmReranker()
        XCTAssertEqual(r.numLabels, 1)
        XCTAssertEqual(r.maxLength, 256)
        try checkReference(r, "families/minilm-reranker", 151)
        let rf = try checkRank(r, "families/minilm-reranker")
        // topK, raw (by logit), and misuse as statuses.
        let top2 = try r.rank(rf.query, documents: rf.documents, topK: 2)
        XCTAssertEqual(top2, Array(try r.rank(rf.query, documents: rf.documents).prefix(2)))
        let raw = try r.rank(rf.query, documents: rf.documents, raw: true)
        XCTAssertEqual(raw.map(\.logit), raw.map(\.logit).sorted(by: >))
        for (q, docs, k) in [("", rf.documents, 1), (rf.query, [], 1), (rf.query, rf.documents, 0),
                             (rf.query, rf.documents, rf.documents.count + 1)] {
            XCTAssertEqual(status { try r.rank(q, documents: docs, topK: k) }, .invalidArgument, "\(q) \(docs.count) \(k)")
        }
        XCTAssertEqual(try r.score([]).scores, [])
    }

    func testXlmrReranker() throws {
        let r = try folderReranker("families/xlmr-reranker-tiny")
        XCTAssertEqual(r.maxLength, 128)
        try checkReference(r, "families/xlmr-reranker-tiny", 260)
        try checkRank(r, "families/xlmr-reranker-tiny")
    }

    func testModernBertReranker() throws {
        let r = try folderReranker("architectures/modernbert-reranker-tiny")
        try checkReference(r, "architectures/modernbert-reranker-tiny", 213)
        try checkRank(r, "architectures/modernbert-reranker-tiny")
        // A classic cross-encoder takes no prompt.
        let e = error { try r.score([Pair(query: "q", passage: "p")], prompt: "x") }
        XCTAssertEqual(e?.status, .invalidArgument)
        XCTAssertTrue(e?.message.contains("takes no prompt") ?? false, "\(String(describing: e))")
    }

    /// DeBERTa-v2 (disentangled attention, SentencePiece), opened from its folder: it has no
    /// token type table, so the reference's passage types (1) are not model inputs.
    func testDebertaReranker() throws {
        let r = try folderReranker("encoders/deberta-reranker-tiny")
        XCTAssertEqual(r.maxLength, 512)
        try checkReference(r, "encoders/deberta-reranker-tiny", 213, types: false)
        try checkRank(r, "encoders/deberta-reranker-tiny")
    }

    /// Qwen3-Reranker: every line, the prompted ones under their
    /// instruction (per call, and as the open-time prompt), rank ordered by
    /// score, the rank file; a prompt with NUL refused.
    func testQwen3RerankerPrompts() throws {
        let folder = try Fixtures.reference("architectures/qwen3-reranker-tiny")
        let r = try Reranker(path: folder, options: RerankerOptions(threads: 2))
        let lines: [PairLine] = try Fixtures.jsonl(try Fixtures.reference("architectures/qwen3-reranker-tiny_reference.jsonl"))
        let groups = Dictionary(grouping: lines, by: { $0.prompt ?? "" })
        XCTAssertEqual(lines.count, 243)
        XCTAssertEqual(groups[""]?.count, 213)
        XCTAssertGreaterThan(groups.count, 1)
        for (prompt, rows) in groups {
            let pairs = rows.map { Pair(query: $0.query, passage: $0.passage) }
            if prompt.isEmpty {
                for (i, l) in rows.enumerated() {
                    XCTAssertEqual(try r.tokenize(query: l.query, passage: l.passage).ids, l.input_ids, "line \(i + 1)")
                }
            }
            let got = try r.score(pairs, prompt: prompt.isEmpty ? nil : prompt)
            for (i, l) in rows.enumerated() {
                XCTAssertEqual(Double(got.scores[i]), l.score, accuracy: 1e-5, "prompt \(prompt) line \(i + 1)")
                XCTAssertEqual(Double(got.logits[i]), l.logit, accuracy: 1e-4, "prompt \(prompt) line \(i + 1)")
            }
            if !prompt.isEmpty {
                let atOpen = try Reranker(path: folder, options: RerankerOptions(threads: 2, prompt: prompt))
                XCTAssertEqual(try atOpen.score(pairs).scores, got.scores, "open-time prompt")
                let ranked = try r.rank(rows[0].query, documents: rows.map(\.passage), prompt: prompt)
                XCTAssertEqual(ranked.map(\.score), ranked.map(\.score).sorted(by: >))
            }
        }
        try checkRank(r, "architectures/qwen3-reranker-tiny")
        XCTAssertEqual(status { try r.rank("q", documents: ["p"], prompt: "a\u{0}b") }, .invalidArgument)
    }
}
