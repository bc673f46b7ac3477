// The async variants: the same results as the synchronous calls, run off
// the cooperative pool; task cancellation stops a running call.
import Foundation
import XCTest
@testable import Embedder

/// The synchronous calls, for comparison: in an async context Swift picks
/// the async overload of a name, so the tests reach the synchronous one
/// through this synchronous function.
func sync<T>(_ body: () throws -> T) rethrows -> T { try body() }

final class AsyncTests: XCTestCase {
    func testAsyncEqualsSync() async throws {
        let path = try Fixtures.minilm()
        let m = try await Model.open(path: path, options: ModelOptions(threads: 2))
        let refs = try sync { try minilmReferences() }
        let texts = refs.map(\.text)
        let got = try await m.encode(texts)
        for (i, r) in refs.enumerated() { XCTAssertLessThanOrEqual(maxAbsDiff(got[i], r.embedding), 1e-4) }
        let plain = try sync { try m.encode(texts) }
        XCTAssertTrue(sameRows(got, plain))
        let one: [Float] = try await m.embed(texts[0])
        XCTAssertTrue(sameBits(one, plain[0]))
        let cut = try await m.encode(texts, options: CallOptions(dimensions: 16))
        XCTAssertEqual(cut.dim, 16)
        let tokens = try await m.encodeTokens(texts)
        XCTAssertEqual(tokens.info.map(\.tokens), refs.map { $0.input_ids.count })
        let q = try await m.encodeQuantized(texts, precision: .ubinary)
        XCTAssertEqual(q.rowLength, 48)
        // Errors arrive typed, from the call's own thread.
        do {
            _ = try await Model.open(path: "/nonexistent.weights")
            XCTFail("opened a missing file")
        } catch EmbedderError.Status.notFound {
        }
    }

    func testManyConcurrentTasks() async throws {
        let m = try sync { try openMinilm(ModelOptions(threads: 1)) }
        let texts = (0..<12).map { "concurrent text \($0)" }
        let want = try sync { try m.encode(texts) }
        try await withThrowingTaskGroup(of: (Int, [Float]).self) { group in
            for i in texts.indices { group.addTask { (i, try await m.embed(texts[i])) } }
            for try await (i, v) in group { XCTAssertTrue(sameBits(v, want[i]), "text \(i)") }
        }
    }

    func testAsyncOutputsAndReranker() async throws {
        let splade = try Model(path: try Fixtures.reference("architectures/splade-tiny"), options: ModelOptions(threads: 2))
        let s = try await splade.encodeSparse(["hello world"])
        XCTAssertEqual(s, try sync { try splade.encodeSparse(["hello world"]) })
        let colbert = try Model(path: try Fixtures.reference("architectures/colbert-tiny"), options: ModelOptions(threads: 2))
        let mv = try await colbert.encodeMultiVector(["hello world"], task: .query)
        XCTAssertEqual(mv, try sync { try colbert.encodeMultiVector(["hello world"], task: .query) })
        let r = try await Reranker.open(path: try Fixtures.reference("architectures/modernbert-reranker-tiny"))
        let pairs = [Pair(query: "a cat", passage: "a cat sits"), Pair(query: "a cat", passage: "stock prices")]
        let scores = try await r.score(pairs)
        XCTAssertEqual(scores, try sync { try r.score(pairs) })
        let ranked = try await r.rank("a cat", documents: pairs.map(\.passage))
        XCTAssertEqual(ranked, try sync { try r.rank("a cat", documents: pairs.map(\.passage)) })
    }

    /// Cancelling the task while the call runs: the call stops at its next
    /// progress point and throws CancellationError. The progress handler
    /// holds the first progress point until the test has cancelled, so the
    /// cancellation surely lands mid-call.
    func testCancellationStopsARunningCall() async throws {
        let gate = Gate()
        let m = try sync { try openMinilm(ModelOptions(threads: 2, progress: { _, _ in
            gate.reachedAndWait()
            return true
        })) }
        let texts = (0..<400).map { "sentence number \($0) about a cat that sits outside" }
        let task = Task { try await m.encode(texts) }
        XCTAssertTrue(gate.waitUntilReached(seconds: 60), "no progress point")
        task.cancel()
        gate.open()
        do {
            _ = try await task.value
            XCTFail("the call was not cancelled")
        } catch is CancellationError {
        }
        XCTAssertEqual(gate.points, 1, "stopped at the first progress point after the cancel")
        // A task cancelled before the call starts does not start it.
        let early = Task { () -> Embeddings in
            withUnsafeCurrentTask { $0?.cancel() }
            return try await m.encode(texts)
        }
        do {
            _ = try await early.value
            XCTFail("not cancelled")
        } catch is CancellationError {
        }
        XCTAssertEqual(gate.points, 1)
    }
}

extension AsyncTests {
    /// More async calls than the cooperative pool has threads, all blocked
    /// at once in their progress handler: each runs on a thread of its own,
    /// and the pool still runs other tasks. (Were the work on the pool, at
    /// most one call per CPU could block there and the pool would starve:
    /// the watchdog then opens the gate after 120 s and the test fails.)
    func testAsyncCallsLeaveTheCooperativePoolFree() async throws {
        let n = ProcessInfo.processInfo.activeProcessorCount * 2 + 2
        let gate = Gate()
        let m = try sync { try openMinilm(ModelOptions(threads: 1, progress: { _, _ in
            gate.reachedAndWait()
            return true
        })) }
        let start = Date()
        let watchdog = DispatchWorkItem { gate.open() }
        DispatchQueue.global().asyncAfter(deadline: .now() + 120, execute: watchdog)
        let tasks = (0..<n).map { i in Task { try await m.embed("text number \(i)") } }
        while gate.points < n && Date().timeIntervalSince(start) < 120 {
            try await Task.sleep(nanoseconds: 10_000_000)
        }
        XCTAssertEqual(gate.points, n, "calls blocked at once")
        let answer = await Task.detached { 6 * 7 }.value
        XCTAssertEqual(answer, 42)
        XCTAssertLessThan(Date().timeIntervalSince(start), 60, "the cooperative pool was starved")
        gate.open()
        watchdog.cancel()
        for t in tasks {
            let v = try await t.value
            XCTAssertEqual(v.count, 384)
        }
    }
}

/// A one-shot gate between a progress handler (another thread) and the test.
final class Gate: @unchecked Sendable {
    private let cond = NSCondition()
    private var reached = false
    private var opened = false
    private var count = 0

    func reachedAndWait() {
        cond.lock()
        count += 1
        reached = true
        cond.broadcast()
        while !opened { cond.wait() }
        cond.unlock()
    }

    func waitUntilReached(seconds: Double) -> Bool {
        cond.lock()
        defer { cond.unlock() }
        let deadline = Date(timeIntervalSinceNow: seconds)
        while !reached { if !cond.wait(until: deadline) { return reached } }
        return true
    }

    func open() {
        cond.lock()
        opened = true
        cond.broadcast()
        cond.unlock()
    }

    var points: Int {
        cond.lock()
        defer { cond.unlock() }
        return count
    }
}
