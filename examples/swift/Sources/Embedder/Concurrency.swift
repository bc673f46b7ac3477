// Progress callbacks, cancellation, and the async variants' executor.
//
// Every model and reranker is opened with one C progress callback
// (`progressCallback`), whose user pointer is the handle's `ProgressBox`
// (owned by the Model/Reranker, so it outlives the C handle). The library
// calls it on the thread that made the call, so per-call state (the
// cancellation flag of an async call) is found through a thread-local
// (`CallState.current`).
import CEmbedder
import Dispatch
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The progress handler of one open handle. Immutable, and the handler is
/// `@Sendable`: safe to share with the library's calling threads.
final class ProgressBox: Sendable {
    let handler: ProgressHandler?
    init(_ handler: ProgressHandler?) { self.handler = handler }
}

/// The thread-local slot holding the current thread's `CallState`.
private let callStateKey: pthread_key_t = {
    var key = pthread_key_t()
    let rc = pthread_key_create(&key, nil)
    precondition(rc == 0, "pthread_key_create failed: \(rc)")
    return key
}()

/// State of one call made through an async variant: whether its task was
/// cancelled. `@unchecked Sendable`: the flag is only read and written under
/// the mutex.
final class CallState: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private var cancelled = false

    init() {
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    func cancel() {
        pthread_mutex_lock(mutex)
        cancelled = true
        pthread_mutex_unlock(mutex)
    }

    var isCancelled: Bool {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return cancelled
    }

    /// The state of the call running on this thread, if any.
    static var current: CallState? {
        pthread_getspecific(callStateKey).map { Unmanaged<CallState>.fromOpaque($0).takeUnretainedValue() }
    }

    /// Runs `body` with `self` as this thread's current state.
    func activate<R>(_ body: () throws -> R) rethrows -> R {
        let previous = pthread_getspecific(callStateKey)
        pthread_setspecific(callStateKey, Unmanaged.passUnretained(self).toOpaque())
        defer { pthread_setspecific(callStateKey, previous) }
        return try body()
    }
}

/// The C progress callback: non-zero stops the call.
private func progressCallback(_ user: UnsafeMutableRawPointer?, _ done: Int, _ total: Int) -> Int32 {
    if let user = user {
        let box = Unmanaged<ProgressBox>.fromOpaque(user).takeUnretainedValue()
        if let handler = box.handler, !handler(done, total) { return 1 }
    }
    if let state = CallState.current, state.isCancelled { return 1 }
    return 0
}

/// Fills a fresh `embd_options` with `fill` and passes it to `body`; the
/// progress callback is always installed, with `box` as its user pointer.
func withOpenOptions<R>(_ box: ProgressBox, _ fill: (OpaquePointer) throws -> Void,
                        _ body: (OpaquePointer) throws -> R) throws -> R {
    guard let o = embd_options_new() else { throw EmbedderError.last(EmbedderError.Status.outOfMemory.rawValue) }
    defer { embd_options_free(o) }
    try fill(o)
    try check(embd_options_set_progress(o, { user, done, total in progressCallback(user, done, total) },
                                        Unmanaged.passUnretained(box).toOpaque()))
    return try body(o)
}

/// Runs `work` on a thread of its own, not on a Swift concurrency executor:
/// a fresh serial Dispatch queue per call, which Dispatch runs on an
/// overcommitting worker thread (a new thread when the others are busy), so
/// a long encode never occupies a thread of the cooperative pool. The
/// engine's own worker threads do the computation; this thread waits for
/// them. Cancelling the task stops the call at its next progress point
/// (every ~50 ms of work) and throws `CancellationError`.
func offCooperativePool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try Task.checkCancellation()
    let state = CallState()
    let result: Result<T, Error> = await withTaskCancellationHandler {
        await withCheckedContinuation { (c: CheckedContinuation<Result<T, Error>, Never>) in
            DispatchQueue(label: "embedder.call").async {
                c.resume(returning: state.activate { Result { try work() } })
            }
        }
    } onCancel: {
        state.cancel()
    }
    switch result {
    case .success(let value):
        return value
    case .failure(let error):
        if state.isCancelled, let e = error as? EmbedderError, e.status == .cancelled {
            throw CancellationError()
        }
        throw error
    }
}
