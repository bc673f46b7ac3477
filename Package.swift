// swift-tools-version:5.9
// The Swift package of the embedder library, at the repository root so that
// SwiftPM finds it when the repository is added by URL:
//
//   .package(url: "https://<host>/<owner>/embedder.git", from: "0.1.0")
//   .product(name: "Embedder", package: "embedder")
//
// The sources live in examples/swift. CEmbedder is the C library:
// - Linux (and macOS with an installed library): a system library found
//   through pkg-config (embedder.pc). Install it first:
//     cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DEMBEDDER_BUILD_TESTS=OFF
//     cmake --build build && cmake --install build --prefix /usr/local
//   (or any prefix, with PKG_CONFIG_PATH=<prefix>/lib/pkgconfig).
// - Apple platforms from a release: a static XCFramework as a binaryTarget
//   named CEmbedder (see examples/swift/README.md, "Apple platforms").
// No unsafeFlags: a package that uses them cannot be a dependency.
import PackageDescription

let package = Package(
    name: "Embedder",
    platforms: [.macOS(.v10_15), .iOS(.v13)],
    products: [
        .library(name: "Embedder", targets: ["Embedder"]),
        .executable(name: "embedder-swift-demo", targets: ["EmbedderDemo"]),
    ],
    targets: [
        // module.modulemap: header "embedder.h" (a symlink to include/embedder.h), link "embedder".
        .systemLibrary(
            name: "CEmbedder",
            path: "examples/swift/Sources/CEmbedder",
            pkgConfig: "embedder"
        ),
        .target(name: "Embedder", dependencies: ["CEmbedder"], path: "examples/swift/Sources/Embedder"),
        .executableTarget(name: "EmbedderDemo", dependencies: ["Embedder"], path: "examples/swift/Sources/EmbedderDemo"),
        .testTarget(name: "EmbedderTests", dependencies: ["Embedder"], path: "examples/swift/Tests/EmbedderTests"),
    ]
)
