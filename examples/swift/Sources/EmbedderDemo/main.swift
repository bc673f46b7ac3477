// embedder-swift-demo: embeds a few sentences and prints their similarity to
// the first one (synchronously and through the async API), then shows how an
// error looks.
// Usage: embedder-swift-demo [MODEL]   (default: $EMBD_MODEL)
import Embedder
import Foundation

let args = CommandLine.arguments
guard let path = args.count > 1 ? args[1] : ProcessInfo.processInfo.environment["EMBD_MODEL"] else {
    FileHandle.standardError.write("usage: embedder-swift-demo MODEL   (or set EMBD_MODEL)\n".data(using: .utf8)!)
    exit(2)
}

let sentences = [
    "A man is playing guitar.",
    "Someone is playing an instrument.",
    "The cat sits outside.",
]

do {
    let model = try Model(path: path, options: ModelOptions(threads: 2))
    let info = model.info
    print("embedder \(embedderVersion): \(info.name), dim \(info.dim), \(info.pooling) pooling, \(info.precision)")
    let vectors = try model.encode(sentences)
    for (i, s) in sentences.enumerated() {
        let sim = try cosineSimilarity(vectors[0], vectors[i])
        print(String(format: "%.4f", Double(sim)) + "  \(s)  (\(vectors.info[i].tokens) tokens)")
    }
    // The async API: the work runs off Swift's cooperative pool.
    let done = DispatchSemaphore(value: 0)
    Task {
        do {
            let v = try await model.encode([sentences[1]], options: CallOptions(dimensions: 64))
            print("async, 64 dimensions: \(v.dim) floats, first \(String(format: "%.4f", Double(v[0].first ?? 0)))")
        } catch {
            print("async error: \(error)")
        }
        done.signal()
    }
    done.wait()
} catch {
    print("error: \(error)")
    exit(1)
}

do {
    _ = try Model(path: "/nonexistent.weights")
} catch let e as EmbedderError {
    print("expected error: \(e)")  // "file not found (status 20): ..."
} catch {
    print("unexpected error: \(error)")
    exit(1)
}
