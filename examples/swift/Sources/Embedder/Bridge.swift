// How Swift values cross the C boundary.
//
// Texts: the C API takes (pointer, length) pairs (`embd_text`), so a Swift
// string's UTF-8 bytes are passed where they are, with no NUL terminator
// and no copy (`String.withUTF8`; a native Swift string is contiguous
// UTF-8). A batch needs every pair alive at once while Swift lends a
// string's bytes only inside a closure, so batches of up to
// `zeroCopyBatchLimit` texts nest one closure per text (no copy) and larger
// batches are copied once into one contiguous buffer (a memcpy per text,
// negligible next to the encoder).
//
// Outputs: every result array is allocated at its final size and handed to
// the library, which writes the numbers into it directly
// (`Array(unsafeUninitializedCapacity:)`: no zero fill and no copy after
// the call). Row views (`ArraySlice`) share that storage.
import CEmbedder

/// Batches up to this many texts are passed without copying their bytes.
let zeroCopyBatchLimit = 64

@inline(__always)
private func cchars(_ p: UnsafePointer<UInt8>) -> UnsafePointer<CChar> {
    UnsafeRawPointer(p).assumingMemoryBound(to: CChar.self)
}

/// Calls `body` with `text` as an `embd_text` (NULL pointer for the empty string).
func withText<R>(_ text: String, _ body: (embd_text) throws -> R) rethrows -> R {
    var s = text
    return try s.withUTF8 { u in
        try body(embd_text(ptr: u.isEmpty ? nil : cchars(u.baseAddress!), len: u.count))
    }
}

/// Calls `body` with `texts` as a contiguous array of `embd_text` (never a
/// NULL pointer, also for no texts).
func withTexts<R>(_ texts: [String], _ body: (UnsafePointer<embd_text>) throws -> R) rethrows -> R {
    let items = UnsafeMutablePointer<embd_text>.allocate(capacity: max(texts.count, 1))
    defer { items.deallocate() }
    if texts.count <= zeroCopyBatchLimit {
        return try nest(texts, 0, items) { try body(items) }
    }
    var total = 0
    for t in texts { total += t.utf8.count }
    let bytes = UnsafeMutablePointer<UInt8>.allocate(capacity: max(total, 1))
    defer { bytes.deallocate() }
    var offset = 0
    for (i, t) in texts.enumerated() {
        var s = t
        let n = s.withUTF8 { u -> Int in
            if let base = u.baseAddress, !u.isEmpty { (bytes + offset).initialize(from: base, count: u.count) }
            return u.count
        }
        items[i] = embd_text(ptr: n == 0 ? nil : cchars(bytes + offset), len: n)
        offset += n
    }
    return try body(items)
}

/// One `withUTF8` closure per text, the innermost calling `body`: every
/// text's bytes stay lent while `body` runs.
private func nest<R>(_ texts: [String], _ i: Int, _ items: UnsafeMutablePointer<embd_text>,
                     _ body: () throws -> R) rethrows -> R {
    if i == texts.count { return try body() }
    var s = texts[i]
    return try s.withUTF8 { u in
        items[i] = embd_text(ptr: u.isEmpty ? nil : cchars(u.baseAddress!), len: u.count)
        return try nest(texts, i + 1, items, body)
    }
}

/// Calls `body` with `s` as a NUL-terminated C string, or NULL for nil.
/// A string with a NUL inside is refused (C would see only its first part).
func withOptionalCString<R>(_ s: String?, _ what: String,
                            _ body: (UnsafePointer<CChar>?) throws -> R) throws -> R {
    guard let s = s else { return try body(nil) }
    if s.utf8.contains(0) { throw EmbedderError.invalidArgument("\(what) must not contain NUL") }
    return try s.withCString { try body($0) }
}

/// An array of `count` elements written by `fill` (which gets the storage,
/// never nil for count > 0); nothing is zero-filled or copied.
func written<T>(_ count: Int, _ fill: (UnsafeMutablePointer<T>) throws -> Void) rethrows -> [T] {
    if count == 0 { return [] }
    return try [T](unsafeUninitializedCapacity: count) { buf, initialized in
        try fill(buf.baseAddress!)
        initialized = count
    }
}

/// `[UInt8]` as Bool flags (the C API's `uint8_t` truncation flags).
func textInfo(_ tokens: [Int], _ truncated: [UInt8]) -> [TextInfo] {
    (0..<tokens.count).map { TextInfo(tokens: tokens[$0], truncated: truncated[$0] != 0) }
}
