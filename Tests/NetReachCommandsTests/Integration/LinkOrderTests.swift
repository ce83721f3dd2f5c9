import Foundation
import NetReachTestSupport
import Testing

/// `scripts/link-order.sh`, the order `scripts/build-release.sh` links `netreach` in: the functions
/// a training run of the commands entered (`scripts/hot-functions.c` under LD_PRELOAD), then the
/// conformance descriptors. Run here on the debug executable, whose own functions are traced the
/// same way (the Swift runtime is in shared libraries there, and is not).
@Suite("The release build's link order (training run)", .offPool)
struct LinkOrderTests {
    /// Every command ran to its end or its stop under the tracer (a breakpoint that broke one
    /// would be reported and its functions left out), each function is listed once, the code
    /// `watch` runs first comes before what only `serve` runs, and the descriptors close the list.
    @Test func theTrainingRunListsTheCommandsFunctionsThenTheDescriptors() async throws {
        let executable = try NetreachProcess.executable().path
        let script = ReleaseBuild.root.appendingPathComponent("scripts/link-order.sh").path
        let made = try await ChildProcess.run("/bin/bash", [script, executable], timeout: .seconds(600))
        try #require(made.status == 0, "\(made.standardError)")
        #expect(!made.standardError.contains("left out"), "\(made.standardError)")
        #expect(!made.standardError.contains("no function"), "\(made.standardError)")
        #expect(!made.standardError.contains("no training run"), "\(made.standardError)")

        let names = made.standardOutput.split(separator: "\n").map(String.init)
        #expect(Set(names).count == names.count, "a name listed twice")
        let firstDescriptor = try #require(names.firstIndex { $0.hasSuffix("Mc") })
        let functions = names[..<firstDescriptor]
        let descriptors = names[firstDescriptor...]
        #expect(descriptors.allSatisfy { $0.hasSuffix("Mc") }, "a function after the descriptors")
        #expect(descriptors.count > 1_000)

        // `watch`'s command, entered in the first command's run; `serve`'s, entered only in the
        // third, after it. (Mangled names: module NetReachCommands, types WatchCommand and
        // ServeCommand, their `run`: code no other command enters.)
        let watch = try #require(functions.firstIndex { $0.contains("16NetReachCommands12WatchCommandV3run") })
        let serve = try #require(functions.firstIndex { $0.contains("16NetReachCommands12ServeCommandV3run") })
        #expect(watch < serve)
        // `get`'s transport: entered by the last command only.
        #expect(functions.contains { $0.contains("23NetReachAsyncHTTPClient") })
    }
}
