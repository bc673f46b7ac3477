// Where the tests find the models and the reference files: the same places
// as the Go tests (examples/go) and the Python tests (python/tests).
//   models: $EMBD_MODEL etc., else models/<name>.weights in a parent of the
//           working directory or of this file (scripts/fetch_*.sh put them there);
//   reference files: $EMBD_SHARED_DIR/reference/..., else shared/reference/...
//           in a parent (the repository's sibling shared/).
// A missing file skips the test on a developer machine and fails it in CI
// ($CI set), as in the Go tests.
import Foundation
import XCTest
@testable import Embedder

struct MissingFixture: Error, CustomStringConvertible {
    let description: String
}

enum Fixtures {
    static let env = ProcessInfo.processInfo.environment

    /// `rel` in the working directory or a parent, or in a parent of this source file.
    static func findUp(_ rel: String) -> String? {
        let fm = FileManager.default
        for start in [fm.currentDirectoryPath, URL(fileURLWithPath: #filePath).deletingLastPathComponent().path] {
            var dir = URL(fileURLWithPath: start)
            while true {
                let p = dir.appendingPathComponent(rel).path
                if fm.fileExists(atPath: p) { return p }
                let parent = dir.deletingLastPathComponent()
                if parent.path == dir.path { break }
                dir = parent
            }
        }
        return nil
    }

    static func missing(_ what: String) -> Error {
        if let ci = env["CI"], !ci.isEmpty { return MissingFixture(description: what) }
        return XCTSkip(what)
    }

    /// $env, else models/<file> in a parent directory.
    static func model(_ envName: String, _ file: String, hint: String) throws -> String {
        if let p = env[envName], !p.isEmpty { return p }
        if let p = findUp("models/" + file) { return p }
        throw missing("\(file) not found: set \(envName) (\(hint))")
    }

    /// all-MiniLM-L6-v2 (scripts/fetch_model.sh).
    static func minilm() throws -> String {
        try model("EMBD_MODEL", "all-MiniLM-L6-v2.weights", hint: "scripts/fetch_model.sh")
    }

    /// A file or folder under reference/: $EMBD_SHARED_DIR/reference/rel, else shared/reference/rel in a parent.
    static func reference(_ rel: String) throws -> String {
        let fm = FileManager.default
        if let d = env["EMBD_SHARED_DIR"], !d.isEmpty {
            let p = d + "/reference/" + rel
            if fm.fileExists(atPath: p) { return p }
        }
        if let p = findUp("shared/reference/" + rel) { return p }
        throw missing("reference/\(rel) not found: set EMBD_SHARED_DIR")
    }

    /// families/name or architectures/name under reference/ (the Go tests' familiesFile).
    static func family(_ name: String) throws -> String {
        for dir in ["families", "architectures", "encoders"] {
            if let p = try? reference(dir + "/" + name) { return p }
        }
        throw missing("\(name) not found under reference/{families,architectures}: set EMBD_SHARED_DIR")
    }

    static func jsonl<T: Decodable>(_ path: String, as: T.Type = T.self, limit: Int = 0) throws -> [T] {
        let text = try String(contentsOfFile: path, encoding: .utf8)
        let decoder = JSONDecoder()
        var out: [T] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
            out.append(try decoder.decode(T.self, from: Data(line.utf8)))
            if limit > 0 && out.count == limit { break }
        }
        return out
    }

    static func json<T: Decodable>(_ path: String, as: T.Type = T.self) throws -> T {
        try JSONDecoder().decode(T.self, from: Data(contentsOf: URL(fileURLWithPath: path)))
    }
}

/// One line of minilm_reference.jsonl and the other embedding references.
struct EmbeddingLine: Decodable {
    let text: String
    let input_ids: [UInt32]
    let embedding: [Double]
    let prompt_name: String?
}

/// One line of a prompt reference (`<folder>_prompt_reference.jsonl`; ids
/// only in some) or of a tokenizer case file (no embedding).
struct ReferenceLine: Decodable {
    let text: String
    let input_ids: [UInt32]?
    let embedding: [Double]?
    let prompt_name: String?
}

/// A row of tests/data/families.tsv (its header says what each column means).
struct Family {
    let name: String
    let folder: String
    let dim: Int
    let maxTokens: Int
    let lines: Int
    let cases: String?
    let caseLines: Int
    let promptLines: Int
    let promptDefault: String?

    /// The rows of tests/data/families.tsv, found in a parent directory.
    static func all() throws -> [Family] {
        try table("families.tsv").map { v in
            let num = { (k: String) in Int(v[k] ?? "0") ?? -1 }
            return Family(
                name: v["name"] ?? "", folder: v["folder"] ?? "", dim: num("dim"), maxTokens: num("max_tokens"),
                lines: num("lines"), cases: v["cases"], caseLines: num("case_lines"),
                promptLines: num("prompt_lines"), promptDefault: v["prompt_default"])
        }
    }
}

/// The rows of tests/data/<file> (tab-separated, a header line, "#" comments,
/// "-" for none), found in a parent directory: column to value.
func table(_ file: String) throws -> [[String: String]] {
    guard let path = Fixtures.findUp("tests/data/" + file) else {
        throw MissingFixture(description: "tests/data/\(file) not found in a parent directory")
    }
    var header: [String] = []
    var out: [[String: String]] = []
    for line in try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n") {
        if line.hasPrefix("#") || line.allSatisfy(\.isWhitespace) { continue }
        let f = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
        if header.isEmpty {
            header = f
            continue
        }
        guard f.count == header.count else {
            throw MissingFixture(description: "\(path): \(f.count) columns, want \(header.count): \(line)")
        }
        var v: [String: String] = [:]
        for (h, x) in zip(header, f) where x != "-" { v[h] = x }
        out.append(v)
    }
    return out
}

let refTexts = [
    "Return true if the object is a frame object.",
    "A classic mbox mailbox.",
    "The café served crème brûlée to a naïve señor from Zürich.",
]

/// The lines of minilm_reference.jsonl for `texts`, in that order.
func minilmReferences(_ texts: [String] = refTexts) throws -> [EmbeddingLine] {
    let all: [EmbeddingLine] = try Fixtures.jsonl(try Fixtures.reference("minilm_reference.jsonl"))
    return try texts.map { t in
        guard let l = all.first(where: { $0.text == t }) else { throw MissingFixture(description: "\(t) not in the reference") }
        return l
    }
}

func maxAbsDiff<A: Collection, B: Collection>(_ a: A, _ b: B) -> Double
where A.Element == Float, B.Element: BinaryFloatingPoint {
    if a.count != b.count { return .infinity }
    return zip(a, b).map { abs(Double($0) - Double($1)) }.max() ?? 0
}

func norm<C: Collection>(_ v: C) -> Double where C.Element == Float {
    v.map { Double($0) * Double($0) }.reduce(0, +).squareRoot()
}

/// Bit-for-bit equality of two float sequences.
func sameBits<A: Collection, B: Collection>(_ a: A, _ b: B) -> Bool where A.Element == Float, B.Element == Float {
    a.count == b.count && zip(a, b).allSatisfy { $0.bitPattern == $1.bitPattern }
}

func sameRows(_ a: Embeddings, _ b: Embeddings) -> Bool {
    a.dim == b.dim && a.count == b.count && sameBits(a.data, b.data)
}

func openMinilm(_ options: ModelOptions = ModelOptions(threads: 1)) throws -> Model {
    try Model(path: try Fixtures.minilm(), options: options)
}

/// The status of the error `body` throws (nil when it does not throw or throws another error).
func status<T>(_ body: () throws -> T) -> EmbedderError.Status? {
    do {
        _ = try body()
        return nil
    } catch let e as EmbedderError {
        return e.status
    } catch {
        return nil
    }
}

func error<T>(_ body: () throws -> T) -> EmbedderError? {
    do {
        _ = try body()
        return nil
    } catch {
        return error as? EmbedderError
    }
}
