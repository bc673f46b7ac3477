import XCTest
@testable import Embedder

final class EmbedderTests: XCTestCase {
    func modelPath() throws -> String {
        guard let p = ProcessInfo.processInfo.environment["EMBD_MODEL"] else {
            throw XCTSkip("set EMBD_MODEL to the all-MiniLM-L6-v2 .weights file")
        }
        return p
    }

    func testEmbed() throws {
        let m = try Model(path: try modelPath())
        XCTAssertEqual(m.dim, 384)
        let v = try m.embed(["Return true if the object is a frame object.", ""])
        XCTAssertEqual(v.count, 2)
        XCTAssertEqual(v[0].count, 384)
        XCTAssertEqual(v[0][0], 0.0596337095, accuracy: 1e-4)   // minilm_reference.jsonl
        XCTAssertEqual(try m.countTokens("Return true if the object is a frame object."), 12)
        XCTAssertEqual(try m.tokenize("a\u{0}b"), try m.tokenize("ab"))
    }

    func testPrecision() throws {
        let path = try modelPath()
        XCTAssertEqual(try Model(path: path).precision, .f32)   // the file's own: an f32 file
        for p in [Precision.f32, .bf16, .int8] {
            let m = try Model(path: path, options: ModelOptions(threads: 1, precision: p))
            XCTAssertEqual(m.precision, p)
            XCTAssertEqual(try m.embed("A classic mbox mailbox.").count, 384)
        }
        XCTAssertEqual(Precision.int8.description, "int8")
    }

    func testErrors() throws {
        XCTAssertThrowsError(try Model(path: "/nonexistent.weights")) { e in
            XCTAssertEqual((e as? EmbedderError)?.status, 20)
        }
    }
}
