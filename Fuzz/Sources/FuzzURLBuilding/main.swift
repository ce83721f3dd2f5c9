import Foundation
import FuzzSupport
import HTTPTypes

@testable import NetReachHTTP

// One input is text, one field per line:
//
//     http://service.test/api/v1/      the service's base URL (an empty line: no base URL)
//     items/42?page=2                  what the request names: `Request(.get, LINE)`
//     q<TAB>a b&c                      a query item per further line: name, TAB, value (no TAB: no value)
//
// The request is resolved as `NetworkService` resolves every request: `ResolvedTarget.resolve`
// against `ResolvedTarget.Base(baseURL)`, where `nil` is the `NetworkError.invalidURL` the service
// throws before any attempt. A URL that resolves must round-trip: the head's path and query are the
// URL's, the query items read back from it as they were given, and it names the host and port the
// input names. A plain path must resolve the same way by text (the fast way) as through Foundation
// (the general way). `HTTPRequest.get(_:)`, which connectivity probes use, reads absolute URLs.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzURLBuilding(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
    guard lines.count >= 2 else { return 0 }
    let baseURL = lines[0].isEmpty ? nil : URL(string: String(lines[0]))
    let base = baseURL.map(ResolvedTarget.Base.init)
    var request = Request(.get, String(lines[1]))
    request.queryItems = lines.dropFirst(2).map { line in
        guard let tab = line.firstIndex(of: "\t") else { return URLQueryItem(name: String(line), value: nil) }
        return URLQueryItem(name: String(line[..<tab]), value: String(line[line.index(after: tab)...]))
    }

    let target = ResolvedTarget.resolve(request.target, queryItems: request.queryItems, base: base)
    if let target { check(target, request: request, baseURL: baseURL) }
    if case .path(let path) = request.target, let base, let parts = base.parts,
        let fast = ResolvedTarget.join(path, queryItems: request.queryItems, to: parts)
    {
        let general = ResolvedTarget.resolveGenerally(.path(path), queryItems: request.queryItems, baseURL: base.url)
        expect(
            fast == general,
            "\(path.debugDescription) joined by text is \(fast), through Foundation \(String(describing: general))")
    }
    if case .url(let url) = request.target, let probe = HTTPRequest.get(url) {
        expect(!probe.host.isEmpty, "a probe of \(url) has no host")
        expect(
            probe.head.path?.hasPrefix("/") == true,
            "a probe of \(url) has the path \(String(describing: probe.head.path))")
    }
    return 0
}

private func check(_ target: ResolvedTarget, request: Request, baseURL: URL?) {
    let what = "\(request.target) against \(baseURL?.absoluteString ?? "no base")"
    expect(target.scheme == "http" || target.scheme == "https", "\(what): scheme \(target.scheme)")
    expect(!target.authority.contains("@"), "\(what): user info in the authority \(target.authority)")
    for part in [target.authority, target.pathAndQuery, target.url.absoluteString] {
        expect(
            part.utf8.allSatisfy { (0x21...0x7E).contains($0) }, "\(what): not visible ASCII: \(part.debugDescription)")
    }
    expect(target.pathAndQuery.hasPrefix("/"), "\(what): the path \(target.pathAndQuery.debugDescription)")

    // The URL a Response carries holds the head's path and query, exactly.
    guard let components = URLComponents(url: target.url, resolvingAgainstBaseURL: false) else {
        return expect(false, "\(what): \(target.url) does not parse again")
    }
    let urlPathAndQuery = components.percentEncodedPath + (components.percentEncodedQuery.map { "?\($0)" } ?? "")
    expect(
        urlPathAndQuery == target.pathAndQuery,
        "\(what): the URL \(target.url) has \(urlPathAndQuery.debugDescription), the head \(target.pathAndQuery.debugDescription)"
    )

    // The query items read back from what is sent as they were given: the last ones, in order.
    // (An item with an empty name and no value is sent as nothing, and reads back as nothing.)
    func isNothing(_ item: URLQueryItem) -> Bool { item.name.isEmpty && item.value == nil }
    let given = request.queryItems.filter { !isNothing($0) }
    if !given.isEmpty {
        let sent = (URLComponents(string: "http://h\(target.pathAndQuery)")?.queryItems ?? []).filter { !isNothing($0) }
        let readBack = Array(sent.suffix(given.count))
        expect(
            readBack == given,
            "\(what): query items \(given) are sent as \(target.pathAndQuery.debugDescription), which reads \(sent)")
    }

    // The origin is the one the input names: nothing decoded, dropped or moved on the way.
    let input: URL?
    switch request.target {
    case .url(let url): input = url
    case .path(let path): input = baseURL.flatMap { URL(string: path, relativeTo: $0)?.absoluteURL }
    }
    guard let input else { return expect(false, "\(what): resolved what Foundation cannot read") }
    expect(input.host == target.url.host, "\(what): the input names host \(input.host ?? "nil"), the URL \(target.url)")
    expect(input.port == target.url.port, "\(what): the input names port \(input.port ?? -1), the URL \(target.url)")
    expect(input.scheme?.lowercased() == target.scheme, "\(what): the input's scheme is \(input.scheme ?? "nil")")
    if target.credentials != nil { expect(input.user != nil, "\(what): credentials from nowhere") }
}
