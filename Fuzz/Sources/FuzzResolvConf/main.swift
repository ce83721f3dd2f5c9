import FuzzSupport
import Glibc

@testable import NetReach

// One input is a resolv.conf file, optionally followed by a NUL byte and the upstream list that
// systemd-resolved writes (/run/systemd/resolve/resolv.conf). Both are written to files and read the
// way the engine reads them: `NameserverSource.nameservers()` (the first candidate file that exists;
// the upstream list when the file names only resolved's stub), which reads each file with
// `ResolvConf.nameservers(atPath:)`.

/// A directory of this process's own, made on first use and removed at exit: in /dev/shm when it can
/// be (memory: a file rewritten per input on a disk was a fifth as fast, its writeback the cost),
/// else in $TMPDIR or /tmp.
private let directory: String = {
    let temporary =
        access("/dev/shm", W_OK) == 0
        ? "/dev/shm" : getenv("TMPDIR").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
    var template = Array("\(temporary)/netreach-fuzz-resolvconf.XXXXXX".utf8CString)
    guard let made = mkdtemp(&template) else {
        fputs("FuzzResolvConf: mkdtemp failed: \(String(cString: strerror(errno)))\n", stderr)
        exit(2)
    }
    let path = String(cString: made)
    atexit {
        unlink(Paths.file)
        unlink(Paths.upstream)
        rmdir(directory)
    }
    return path
}()

private enum Paths {
    static let file = directory + "/resolv.conf"
    static let upstream = directory + "/upstream.conf"
    /// A candidate that never exists, as `/etc/netns/NAME/resolv.conf` mostly does not.
    static let missing = directory + "/netns/resolv.conf"
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzResolvConf(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeBufferPointer(start: data, count: size)
    let separator = bytes.firstIndex(of: 0)
    let file = separator.map { bytes[..<$0] } ?? bytes[...]
    let upstream = separator.map { bytes[($0 + 1)...] }
    write(file, to: Paths.file)
    if let upstream { write(upstream, to: Paths.upstream) } else { unlink(Paths.upstream) }

    let source = NameserverSource(candidates: [Paths.missing, Paths.file], resolvedUpstreamPath: Paths.upstream)
    let inUse = source.nameservers()
    let fromFile = ResolvConf.nameservers(atPath: Paths.file)
    let text = Substring(String(decoding: file, as: UTF8.self))
    let fromText = ResolvConf.nameservers(in: text)

    // Reading the file is parsing its text (a file over the 64 KiB limit is read only up to it).
    if file.count <= ResolvConf.maximumSize {
        expect(fromFile == fromText, "the file gives \(fromFile), its text \(fromText)")
    }
    // glibc's MAXNS, and no address twice.
    expect(fromText.count <= ResolvConf.maximumNameservers, "more than MAXNS nameservers: \(fromText)")
    expect(Set(fromText).count == fromText.count, "a nameserver twice: \(fromText)")
    // Everything kept came from a `nameserver` line: no valid line, no nameserver.
    // (Split as bytes: "\r\n" is one Character, and the reader splits at every "\n".)
    let nameserverLines = file.split(separator: UInt8(ascii: "\n")).filter {
        $0.starts(with: "nameserver ".utf8) || $0.starts(with: "nameserver\t".utf8)
    }
    expect(fromText.isEmpty || !nameserverLines.isEmpty, "nameservers \(fromText) without a nameserver line")
    expect(fromText.count <= nameserverLines.count, "\(fromText) from \(nameserverLines.count) nameserver lines")

    for address in fromText {
        // What the monitor reports (JSON, `netreach status`) reads back as the same address...
        expect(IPAddress(address.description) == address, "\(address) does not read back from its description")
    }
    // ...and the list, written as a resolv.conf, reads back as the same list.
    let written = fromText.map { "nameserver \($0)\n" }.joined()
    let reread = ResolvConf.nameservers(in: Substring(written))
    expect(reread == fromText, "\(fromText) written as \(written.debugDescription) reads back as \(reread)")

    // The source differs from the file only when the file names nothing but resolved's stub and
    // the upstream list exists; then the upstream list decides.
    if inUse != fromFile {
        expect(
            !fromFile.isEmpty && fromFile.allSatisfy(ResolvConf.stubAddresses.contains) && upstream != nil,
            "the source gives \(inUse) for a file with \(fromFile)")
        let upstreamText = Substring(upstream.map { String(decoding: $0, as: UTF8.self) } ?? "")
        expect(
            inUse == ResolvConf.nameservers(in: upstreamText), "the source gives \(inUse), not the upstream list")
    }
    return 0
}

/// Replaces the file at `path` with `bytes`, or stops the run: a fuzzer that cannot write its
/// input would test nothing.
private func write(_ bytes: Slice<UnsafeBufferPointer<UInt8>>, to path: String) {
    let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    guard descriptor >= 0 else {
        fputs("FuzzResolvConf: cannot write \(path): \(String(cString: strerror(errno)))\n", stderr)
        exit(2)
    }
    defer { close(descriptor) }
    var written = 0
    while written < bytes.count {
        let count = bytes.withContiguousStorageIfAvailable { buffer in
            Glibc.write(descriptor, buffer.baseAddress! + written, buffer.count - written)
        }
        guard let count, count > 0 else {
            fputs("FuzzResolvConf: cannot write \(path): \(String(cString: strerror(errno)))\n", stderr)
            exit(2)
        }
        written += count
    }
}
