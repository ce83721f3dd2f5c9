#if os(Linux)
import CNetReachLinux
import NetReachSystem
import Glibc

/// Reads nameservers from resolv.conf the way glibc's resolver does (`res_init`).
///
/// Documented fallbacks (bad input never crashes): a missing or unreadable file, or one with no
/// valid `nameserver` line, means no nameservers (`supportsDNS == false`); files over 64 KiB are
/// read only up to that size.
enum ResolvConf {
    static let maximumSize = 64 * 1024
    /// glibc's MAXNS: later `nameserver` lines are ignored.
    static let maximumNameservers = 3
    /// systemd-resolved's local stub listeners.
    static let stubAddresses: Set<IPAddress> = [IPAddress("127.0.0.53")!, IPAddress("127.0.0.54")!]

    /// The nameservers named in `text`, as glibc's resolver takes them, without duplicates:
    /// see ``configuredNameservers(in:)``.
    static func nameservers(in text: Substring) -> [IPAddress] {
        var result: [IPAddress] = []
        for address in configuredNameservers(in: text) where !result.contains(address) { result.append(address) }
        return result
    }

    /// The `nameserver` entries glibc's `res_init` (2.36) keeps, in order, duplicates included,
    /// checked against glibc itself on this machine (a differential test reads what `res_ninit` keeps):
    /// - a line counts only if it *starts* with `nameserver` followed by a space or tab;
    /// - the address ends at the first space, tab or newline, and must be exact: `192.0.2.1#x`,
    ///   `192.0.2.1;x` and a CRLF line's `192.0.2.1\r` are rejected, not trimmed;
    /// - IPv4 is read by `inet_aton`, so `127.1`, `0x7f.0.0.1`, `2130706433` and octal `010.0.0.1`
    ///   are addresses; IPv6 by `inet_pton`, with an optional `%zone` that is dropped (glibc keeps
    ///   the address whatever the zone names);
    /// - only the first three valid lines count (MAXNS), duplicates among them too.
    ///
    /// Unlike glibc, which then falls back on 127.0.0.1, no valid line means no nameserver: a
    /// resolver that will ask a server nobody configured is not DNS support.
    static func configuredNameservers(in text: Substring) -> [IPAddress] {
        var result: [IPAddress] = []
        for line in text.utf8.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true) {
            guard result.count < maximumNameservers else { break }
            if let address = nameserver(in: Array(line)) { result.append(address) }
        }
        return result
    }

    private static let keyword = Array("nameserver".utf8)
    private static let space = UInt8(ascii: " "), tab = UInt8(ascii: "\t")

    /// The address of one `nameserver` line, or `nil` if glibc would not take it.
    private static func nameserver(in line: [UInt8]) -> IPAddress? {
        guard line.count > keyword.count, line.starts(with: keyword),
            line[keyword.count] == space || line[keyword.count] == tab
        else { return nil }
        var token = line.dropFirst(keyword.count).drop { $0 == space || $0 == tab }
        if let end = token.firstIndex(where: { $0 == space || $0 == tab }) { token = token[..<end] }
        // Exact: no trailing "\r", "\v" or "\f" (C's other white space), no NUL.
        guard !token.isEmpty, !token.contains(where: { $0 == 0 || (9...13).contains($0) }) else { return nil }
        let text = String(decoding: token, as: UTF8.self)
        var ipv4 = in_addr()
        if inet_aton(text, &ipv4) != 0 {
            return withUnsafeBytes(of: ipv4.s_addr) { IPAddress(networkOrder: $0) }
        }
        // glibc keeps an IPv6 address whatever its zone says (an unknown interface, nothing).
        let address = text.split(separator: "%", maxSplits: 1, omittingEmptySubsequences: false)[0]
        var ipv6 = in6_addr()
        guard inet_pton(AF_INET6, String(address), &ipv6) == 1 else { return nil }
        return withUnsafeBytes(of: ipv6) { IPAddress(networkOrder: $0) }
    }

    /// Reads and parses the file at `path` (following symlinks); `[]` when it cannot be read.
    static func nameservers(atPath path: String) -> [IPAddress] {
        guard let bytes = SystemCall.readFile(path, limit: maximumSize) else { return [] }
        return nameservers(in: Substring(String(decoding: bytes, as: UTF8.self)))
    }
}

#endif
