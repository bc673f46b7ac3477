// embedder-swift-demo: embeds a few sentences and prints their similarity to
// the first one, then shows how an error looks.
// Usage: embedder-swift-demo [MODEL]   (default: $EMBD_MODEL)
import Embedder
import Foundation

let args = CommandLine.arguments
guard let path = args.count > 1 ? args[1] : ProcessInfo.processInfo.environment["EMBD_MODEL"] else {
    FileHandle.standardError.write("usage: embedder-swift-demo MODEL   (or set EMBD_MODEL)\n".data(using: .utf8)!)
    exit(2)
}

do {
    let model = try Model(path: path, options: ModelOptions(threads: 2))
    print("embedder \(embedderVersion): \(model.name), dim \(model.dim)")
    let sentences = [
        "A man is playing guitar.",
        "Someone is playing an instrument.",
        "The cat sits outside.",
    ]
    let vectors = try model.embed(sentences)
    for (s, v) in zip(sentences, vectors) {
        let sim = try cosineSimilarity(vectors[0], v)
        let n = try model.countTokens(s)
        print(String(format: "%.4f", Double(sim)) + "  \(s)  (\(n) tokens)")
    }
} catch {
    print("error: \(error)")
    exit(1)
}

do {
    _ = try Model(path: "/nonexistent.weights")
} catch let e as EmbedderError {
    print("expected error: \(e)")   // "file not found (status 20): embd_open: ..."
} catch {
    print("unexpected error: \(error)")
    exit(1)
}
