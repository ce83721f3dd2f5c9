#if canImport(Glibc)
import Glibc

/// What the test binary was built with, for the few tests that must run differently under a
/// sanitizer.
package enum Sanitizer {
    /// Whether this process runs under ThreadSanitizer (`swift test --sanitize=thread`): its
    /// runtime, linked into the executable, exports `__tsan_init`.
    package static let threadSanitizerIsOn: Bool = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "__tsan_init") != nil
}
#endif
