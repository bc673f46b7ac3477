// swift-tools-version:5.5
// SwiftPM package for the embedder C library: a system-library target
// (CEmbedder: module.modulemap with header "embedder.h", link "embedder"),
// a Swift wrapper (Embedder) and a small program (embedder-swift-demo).
import PackageDescription

let package = Package(
    name: "Embedder",
    products: [
        .library(name: "Embedder", targets: ["Embedder"]),
        .executable(name: "embedder-swift-demo", targets: ["EmbedderDemo"]),
    ],
    targets: [
        // Finds -L/-I through pkg-config (embedder.pc of an installed prefix:
        // PKG_CONFIG_PATH=<prefix>/lib/pkgconfig); the header itself is the
        // module map's sibling embedder.h (a symlink to include/embedder.h).
        .systemLibrary(name: "CEmbedder", path: "Sources/CEmbedder", pkgConfig: "embedder"),
        .target(name: "Embedder", dependencies: ["CEmbedder"]),
        .executableTarget(name: "EmbedderDemo", dependencies: ["Embedder"]),
        .testTarget(name: "EmbedderTests", dependencies: ["Embedder"]),
    ]
)
