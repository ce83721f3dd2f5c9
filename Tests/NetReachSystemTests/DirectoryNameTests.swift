import Foundation
import Testing

@testable import NetReachSystem

/// `directoryName`: where serve's web configuration takes relative file names from, and which
/// directory a namespace's path is watched in, as Foundation's `deletingLastPathComponent` gives it
/// (which neither links), "." for none.
@Suite("Directory names")
struct DirectoryNameTests {
    @Test(arguments: [
        "/etc/netreach/web.yml", "web.yml", "/web.yml", "a/b/web.yml", "./web.yml", "/etc/netreach/", "a//b",
        "/var/run/netns/blue", "/run/docker/netns/1a2b", "/", "//x",
    ])
    func asFoundationSays(path: String) {
        let foundation = (path as NSString).deletingLastPathComponent
        #expect(path.directoryName == (foundation.isEmpty ? "." : foundation), "\(path)")
    }
}
