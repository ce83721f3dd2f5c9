/// An address to listen on as the command line and serve's `--config` file write it:
/// `HOST:PORT`, or `[ADDRESS]:PORT` (brackets needed around IPv6, allowed around IPv4).
///
/// ```swift
/// try HostPort(parsing: "[::1]:9817", allowsZeroPort: false)   // host "::1", port 9817
/// try HostPort(parsing: "fd00::7:9817", allowsZeroPort: false) // Invalid: which colon is the port's?
/// ```
package struct HostPort: Sendable, Hashable {
    /// Why a text is not an address: what was expected, with an example.
    package struct Invalid: Error, Sendable, Hashable {
        package var message: String
    }

    /// The host, without brackets.
    package var host: String
    package var port: Int

    /// `allowsZeroPort` accepts port 0 (the kernel picks a free one, for listening).
    package init(parsing text: Substring, allowsZeroPort: Bool) throws(Invalid) {
        let hostText: Substring
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else {
                throw Invalid(message: "expected [IPV6]:PORT, such as [::1]:8080.")
            }
            hostText = text[text.index(after: text.startIndex)..<close]
            portText = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":"), !text[..<colon].contains(":") else {
                throw Invalid(message: "expected HOST:PORT, such as 127.0.0.1:8080 (IPv6 in brackets: [::1]:8080).")
            }
            hostText = text[..<colon]
            portText = text[text.index(after: colon)...]
        }
        let lowest = allowsZeroPort ? 0 : 1
        guard !hostText.isEmpty, portText.allSatisfy({ ("0"..."9").contains($0) }), let port = Int(portText),
            (lowest...65535).contains(port)
        else {
            throw Invalid(message: "expected HOST:PORT with a port from \(lowest) to 65535.")
        }
        host = String(hostText)
        self.port = port
    }
}
