#if os(Linux)
import Foundation
import NetReachTestSupport
import Testing

/// Bodies cut short, content codings and resuming coded downloads in `netreach get` (issue 48,
/// items 6-8), each beside curl 7.88.1 on the same local server in the same test
/// (Scripts/coding-server.py, on 127.0.0.1). curl is run with `--compressed`, which asks for what
/// `get` asks for by default; without it curl asks for no coding and writes what came as it came.
@Suite(
    "netreach get: bodies cut short, content codings and coded resumes beside curl (integration)",
    .offPool, .serialized, .enabled(if: ExternalServer.available("curl", "python3")), .timeLimit(.minutes(4)))
struct GetCodingsTests {
    // MARK: Item 6: a body shorter than announced

    @Test("A body cut short is 18 as with curl, and what came goes to standard output as curl writes it")
    func cutShortToStandardOutput() async throws {
        let (curl, netreach) = (try ExternalServer.require("curl"), try netreachPath())
        try await CodingServer.with { server in
            let document = try await server.document()
            // The query, then curl's status for it, which ours must be.
            let cases: [(String, Int32)] = [
                ("framing=length&cut=1000", 18),
                ("framing=chunked&cut=1000", 18),
                ("coding=gzip&framing=length&cut=50000", 18),
                ("coding=gzip&framing=chunked&cut=50000", 18),
                ("coding=deflate&framing=length&cut=50000", 18),
                // A reset is no partial file, for both: 56.
                ("framing=length&cut=1000&reset=1", 56),
                // Without a length the close is the end: whole, for both.
                ("framing=close&cut=1000", 0),
            ]
            for (query, status) in cases {
                let url = server.url("/body?\(query)")
                let theirs = try await ChildProcess.run(curl, ["-sS", "--compressed", url])
                #expect(theirs.status == status, "curl \(query): \(theirs.standardError)")
                let ours = try await ChildProcess.run(netreach, ["get", "-q", "--retries", "0", url])
                #expect(ours.status == status, "\(query): \(ours.standardError)")
                // What came, decoded, is a start of the document; curl's is too. AsyncHTTPClient
                // may hand over less than it read when the connection closes (Docs/DesignNotes.md,
                // "Resuming downloads"), so ours is compared as a prefix, not for equal length.
                #expect(document.starts(with: theirs.output), "curl \(query): \(theirs.output.count) bytes")
                #expect(document.starts(with: ours.output), "\(query): \(ours.output.count) bytes")
                // After a close (not a reset, which may drop what either had not read yet).
                if status != 56 {
                    #expect(ours.output.count <= theirs.output.count, "\(query): \(ours.output.count) against curl's")
                }
                if status == 18 {
                    #expect(ours.standardError.contains("closed the connection"), "\(ours.standardError)")
                }
            }
        }
    }

    @Test("With -o a body cut short keeps what came, in FILE.part, as curl keeps it in FILE")
    func cutShortIntoAFile() async throws {
        let (curl, netreach) = (try ExternalServer.require("curl"), try netreachPath())
        let scratch = try TemporaryDirectory("netreach-cut-short")
        defer { scratch.remove() }
        try await CodingServer.with { server in
            let document = try await server.document()
            for query in ["framing=length&cut=100000", "coding=gzip&framing=chunked&cut=50000"] {
                let url = server.url("/body?\(query)")
                let (ours, theirs) = (scratch.path("ours"), scratch.path("theirs"))
                let curled = try await ChildProcess.run(curl, ["-sS", "--compressed", "-o", theirs, url])
                #expect(curled.status == 18, "curl \(query): \(curled.standardError)")
                let got = try await ChildProcess.run(netreach, ["get", "-q", "--retries", "0", "-o", ours, url])
                #expect(got.status == 18, "\(query): \(got.standardError)")
                #expect(!FileManager.default.fileExists(atPath: ours), "a cut body under the final name")
                let kept = try Data(contentsOf: URL(fileURLWithPath: ours + ".part"))
                let curlKept = try Data(contentsOf: URL(fileURLWithPath: theirs))
                #expect(!kept.isEmpty && document.starts(with: kept), "\(query): \(kept.count) bytes kept")
                #expect(document.starts(with: curlKept) && kept.count <= curlKept.count, "\(query)")
                try? FileManager.default.removeItem(atPath: ours + ".part")
            }
        }
    }

    @Test("An unframed gzip body whose stream had not ended at the close: 18 here, where curl 7.88 says 0")
    func unframedGzipCutShort() async throws {
        let (curl, netreach) = (try ExternalServer.require("curl"), try netreachPath())
        try await CodingServer.with { server in
            let document = try await server.document()
            let url = server.url("/body?coding=gzip&framing=close&cut=50000")
            // curl writes the decoded start and exits 0: a cut body passes for a whole one.
            let theirs = try await ChildProcess.run(curl, ["-sS", "--compressed", url])
            #expect(theirs.status == 0 && theirs.output.count < document.count, "\(theirs.standardError)")
            let ours = try await ChildProcess.run(netreach, ["get", "-q", "--retries", "0", url])
            #expect(ours.status == 18, "\(ours.standardError)")
            #expect(ours.standardError.contains("before its compressed stream ended"), "\(ours.standardError)")
            #expect(document.starts(with: ours.output))
        }
    }

    // MARK: Item 7: content codings

    @Test("Each coding and framing: the same bytes and status as curl --compressed, or the departure named")
    func codingsAsCurl() async throws {
        let (curl, netreach) = (try ExternalServer.require("curl"), try netreachPath())
        try await CodingServer.with { server in
            let document = try await server.document()
            let ok = Data("ok\n".utf8)
            // The coding, then (curl's status, its body) and (ours) when they differ.
            let same: [String] = [
                "identity", "identity-named", "gzip", "x-gzip", "deflate", "raw-deflate", "gzip-gzip",
                "gzip-identity",
            ]
            for coding in same {
                for framing in ["length", "chunked", "close"] {
                    let url = server.url("/body?coding=\(coding)&framing=\(framing)")
                    let theirs = try await ChildProcess.run(curl, ["-sS", "--compressed", url])
                    let ours = try await ChildProcess.run(netreach, ["get", "-q", url])
                    #expect(theirs.status == 0 && theirs.output == document, "curl \(coding) \(framing)")
                    #expect(ours.status == 0, "\(coding) \(framing): \(ours.standardError)")
                    #expect(ours.output == theirs.output, "\(coding) \(framing): \(ours.output.count) bytes")
                }
            }
            // More than five codings, and one nobody decodes: 61 for both, nothing written.
            for coding in ["six-gzip", "unknown"] {
                let url = server.url("/body?coding=\(coding)")
                let theirs = try await ChildProcess.run(curl, ["-sS", "--compressed", url])
                let ours = try await ChildProcess.run(netreach, ["get", "-q", url])
                #expect(theirs.status == 61 && theirs.output.isEmpty, "curl \(coding): \(theirs.standardError)")
                #expect(ours.status == 61 && ours.output.isEmpty, "\(coding): \(ours.status) \(ours.standardError)")
            }
            #expect(
                try await ChildProcess.run(netreach, ["get", "-q", server.url("/body?coding=unknown")]).standardError
                    .contains("coded with snappy, which NetReach does not decode"))
            // br and zstd sent unasked: curl (built with brotli and zstd) decodes them; netreach
            // does not decode them (no decoder without a new system library) and so never
            // writes them as if decoded: 61, with a sentence naming the coding.
            for coding in ["br", "zstd"] {
                let url = server.url("/body?coding=\(coding)")
                let theirs = try await ChildProcess.run(curl, ["-sS", "--compressed", url])
                #expect(theirs.status == 0 && theirs.output == ok, "curl \(coding): \(theirs.standardError)")
                let ours = try await ChildProcess.run(netreach, ["get", "-q", url])
                #expect(ours.status == 61 && ours.output.isEmpty, "\(coding): \(ours.status)")
                #expect(ours.standardError.contains("coded with \(coding)"), "\(ours.standardError)")
                // Asked for by the caller, it is the caller's to decode: written as it came, as
                // curl writes it without --compressed.
                let asked = try await ChildProcess.run(
                    netreach, ["get", "-q", "-H", "Accept-Encoding: \(coding)", url])
                let curlAsked = try await ChildProcess.run(curl, ["-sS", "-H", "Accept-Encoding: \(coding)", url])
                #expect(asked.status == 0 && curlAsked.status == 0, "\(asked.standardError)")
                #expect(asked.output == curlAsked.output && asked.output != ok, "\(coding)")
            }
            // A gzip body with bytes after its member that start no other: curl 7.88 writes the
            // document and then fails with 23 ("Failed writing received data"); netreach ignores
            // the garbage as browsers do (the member's CRC and length were right).
            let garbage = server.url("/body?coding=gzip-garbage")
            let curlGarbage = try await ChildProcess.run(curl, ["-sS", "--compressed", garbage])
            #expect(curlGarbage.status == 23 && curlGarbage.output == document, "\(curlGarbage.standardError)")
            let ourGarbage = try await ChildProcess.run(netreach, ["get", "-q", garbage])
            #expect(ourGarbage.status == 0 && ourGarbage.output == document, "\(ourGarbage.standardError)")
            // An error status whose body is in a coding not decoded: the status is the answer
            // (22, as curl -f says), and no undecoded body goes out.
            let missing = server.url("/body?coding=unknown&status=404+Not+Found")
            let curlMissing = try await ChildProcess.run(curl, ["-sS", "-f", "--compressed", missing])
            #expect(curlMissing.status == 22, "\(curlMissing.standardError)")
            let ourMissing = try await ChildProcess.run(netreach, ["get", "-q", missing])
            #expect(ourMissing.status == 22 && ourMissing.output.isEmpty, "\(ourMissing.standardError)")
        }
    }

    @Test("No body at all with Content-Encoding, and HEAD with any coding: nothing to decode, 0 as curl")
    func nothingToDecode() async throws {
        let (curl, netreach) = (try ExternalServer.require("curl"), try netreachPath())
        try await CodingServer.with { server in
            for framing in ["length", "chunked", "close"] {
                let url = server.url("/body?coding=gzip&zero=1&framing=\(framing)")
                let theirs = try await ChildProcess.run(curl, ["-sS", "--compressed", url])
                let ours = try await ChildProcess.run(netreach, ["get", "-q", url])
                #expect(theirs.status == 0 && theirs.output.isEmpty, "curl \(framing): \(theirs.standardError)")
                #expect(ours.status == 0 && ours.output.isEmpty, "\(framing): \(ours.standardError)")
            }
            for coding in ["gzip", "unknown", "br"] {
                let url = server.url("/body?coding=\(coding)")
                let theirs = try await ChildProcess.run(curl, ["-sS", "--compressed", "-I", url])
                let ours = try await ChildProcess.run(netreach, ["get", "-q", "-I", url])
                #expect(theirs.status == 0, "curl -I \(coding): \(theirs.standardError)")
                #expect(ours.status == 0, "-I \(coding): \(ours.standardError)")
                #expect(ours.standardOutput.lowercased().contains("content-encoding: "), "\(ours.standardOutput)")
            }
        }
    }

    @Test("get asks for deflate and gzip, as curl --compressed without br and zstd; identity when asked")
    func acceptEncodingAsSent() async throws {
        let (curl, netreach) = (try ExternalServer.require("curl"), try netreachPath())
        try await CodingServer.with { server in
            let url = server.url("/body?size=10")
            for options in [[], ["--compressed"]] {
                _ = try await ChildProcess.run(netreach, ["get", "-q"] + options + [url])
                #expect(server.lastField("Accept-Encoding") == "deflate, gzip", "\(options)")
            }
            _ = try await ChildProcess.run(netreach, ["get", "-q", "-H", "Accept-Encoding: identity", url])
            #expect(server.lastField("Accept-Encoding") == "identity")
            _ = try await ChildProcess.run(curl, ["-sS", "--compressed", url])
            #expect(server.lastField("Accept-Encoding") == "deflate, gzip, br, zstd")
            _ = try await ChildProcess.run(curl, ["-sS", url])
            #expect(server.lastField("Accept-Encoding") == nil)
        }
    }

    @Test("-H 'Accept-Encoding:' sends none and writes the body as it came, as curl without --compressed")
    func acceptEncodingRemoved() async throws {
        let (curl, netreach) = (try ExternalServer.require("curl"), try netreachPath())
        try await CodingServer.with { server in
            let document = try await server.document(size: 2000)
            server.clear() // the document's own request
            for coding in ["gzip", "deflate", "br", "unknown", "identity"] {
                let url = server.url("/body?size=2000&coding=\(coding)")
                let theirs = try await ChildProcess.run(curl, ["-sS", "-H", "Accept-Encoding:", url])
                #expect(theirs.status == 0, "curl \(coding): \(theirs.standardError)")
                #expect(server.heads().count == 1 && server.lastField("Accept-Encoding") == nil, "\(server.heads())")
                let ours = try await ChildProcess.run(netreach, ["get", "-q", "-H", "Accept-Encoding:", url])
                #expect(ours.status == 0, "\(coding): \(ours.status) \(ours.standardError)")
                #expect(server.heads().count == 2 && server.lastField("Accept-Encoding") == nil, "\(server.heads())")
                // Not decoded: nothing asked for a coding, so nothing undoes one.
                #expect(
                    ours.output == theirs.output, "\(coding): \(ours.output.count) against \(theirs.output.count) bytes"
                )
                #expect((ours.output == document) == (coding == "identity" || coding == "unknown"), "\(coding)")
                server.clear()
            }
            // curl --compressed decodes gzip it did not ask for once -H removed its Accept-Encoding;
            // get does not (its --compressed changes nothing): the body is what the server sent.
            let gzip = server.url("/body?size=2000&coding=gzip")
            let compressed = try await ChildProcess.run(curl, ["-sS", "--compressed", "-H", "Accept-Encoding:", gzip])
            #expect(server.lastField("Accept-Encoding") == nil, "\(server.heads())")
            #expect(compressed.status == 0 && compressed.output == document, "\(compressed.standardError)")
            let ours = try await ChildProcess.run(
                netreach, ["get", "-q", "--compressed", "-H", "Accept-Encoding:", gzip])
            #expect(server.lastField("Accept-Encoding") == nil, "\(server.heads())")
            #expect(ours.status == 0 && ours.output.starts(with: [0x1F, 0x8B]), "\(ours.standardError)")
            // A field of the name given too wins over the removal, as in curl.
            _ = try await ChildProcess.run(
                netreach, ["get", "-q", "-H", "Accept-Encoding:", "-H", "Accept-Encoding: identity", gzip])
            #expect(server.lastField("Accept-Encoding") == "identity")
            _ = try await ChildProcess.run(
                curl, ["-sS", "-H", "Accept-Encoding:", "-H", "Accept-Encoding: identity", gzip])
            #expect(server.lastField("Accept-Encoding") == "identity")
        }
    }

    // MARK: Item 8: resuming a coded download

    @Test("A gzip download that breaks is finished by the retry with an identity range, as curl's whole file")
    func retryResumesInIdentityBytes() async throws {
        let (curl, netreach) = (try ExternalServer.require("curl"), try netreachPath())
        let scratch = try TemporaryDirectory("netreach-coded-retry")
        defer { scratch.remove() }
        try await CodingServer.with { server in
            let whole = try await ChildProcess.run(curl, ["-sS", "--compressed", server.url("/file?client=curl")])
            try #require(whole.status == 0, "\(whole.standardError)")
            // Each: the query, what the answer that finishes the file must be.
            let cases: [(String, String)] = [
                // The range of the identity representation, guarded by the date (the gzip
                // representation's ETag is not the identity one's).
                ("cut=40000", "206"),
                // A server that ignores If-Range and has a new version: its 206 is not spliced;
                // the next attempt asks for the whole body.
                ("cut=40000&ifrange=ignore&changes=1", "200"),
                // A range answered in gzip bytes: not spliced, the whole body is asked for.
                ("cut=40000&coded206=1", "200"),
                // No ranges at all: the 200 starts the file over.
                ("cut=40000&ranges=none", "200"),
            ]
            for (query, finisher) in cases {
                server.clear()
                let output = scratch.path("retried-\(finisher)-\(query.count)")
                let url = server.url("/file?\(query)&client=ours")
                let got = try await ChildProcess.run(netreach, ["get", "-q", "--retries", "3", "-o", output, url])
                #expect(got.status == 0, "\(query): \(got.standardError)")
                let heads = server.heads()
                // The second version, when the server has one, as curl gets it now.
                let expected =
                    query.contains("changes")
                    ? try await ChildProcess.run(curl, ["-sS", "--compressed", url]).output : whole.output
                #expect(try Data(contentsOf: URL(fileURLWithPath: output)) == expected, "\(query)")
                #expect(heads.count >= 2, "\(query): \(heads)")
                guard heads.count >= 2 else { continue }
                // The first asked for gzip and got it; the second asked for the rest uncoded.
                #expect(CodingServer.field("Accept-Encoding", heads[0]) == "deflate, gzip")
                #expect(CodingServer.field("Range", heads[1])?.hasPrefix("bytes=") == true, "\(query): \(heads[1])")
                #expect(CodingServer.field("Accept-Encoding", heads[1]) == "identity", "\(heads[1])")
                #expect(CodingServer.field("If-Range", heads[1]) == "Sun, 01 Nov 2026 10:00:00 GMT", "\(heads[1])")
                if query == "cut=40000" {
                    // curl's --retry leaves a partial file alone (18 is not transient to it); with
                    // --retry-all-errors it starts over and ends with the same file as ours.
                    let curlURL = server.url("/file?\(query)&client=curl-retry")
                    let (once, again) = (scratch.path("curl-retry"), scratch.path("curl-retry-all"))
                    let retried = try await ChildProcess.run(
                        curl, ["-sS", "--compressed", "--retry", "3", "--retry-delay", "0", "-o", once, curlURL])
                    #expect(retried.status == 18, "\(retried.standardError)")
                    let allURL = server.url("/file?\(query)&client=curl-retry-all")
                    let all = try await ChildProcess.run(
                        curl,
                        [
                            "-sS", "--compressed", "--retry", "3", "--retry-all-errors", "--retry-delay", "0", "-o",
                            again, allURL,
                        ])
                    #expect(all.status == 0, "\(all.standardError)")
                    #expect(
                        try Data(contentsOf: URL(fileURLWithPath: again))
                            == Data(contentsOf: URL(fileURLWithPath: output)))
                }
                if finisher == "200" && !query.contains("ranges=none") {
                    // The refused 206, then a request without a range.
                    #expect(heads.count == 3 && CodingServer.field("Range", heads[2]) == nil, "\(query): \(heads)")
                }
            }
        }
    }

    @Test("--continue finishes a coded download's part; curl -C - --compressed asks gzip bytes and cannot")
    func continueAfterACodedDownload() async throws {
        let (curl, netreach) = (try ExternalServer.require("curl"), try netreachPath())
        let scratch = try TemporaryDirectory("netreach-coded-continue")
        defer { scratch.remove() }
        try await CodingServer.with { server in
            let whole = try await ChildProcess.run(curl, ["-sS", "--compressed", server.url("/file?client=whole")])
            // The mode, then curl's status when it continues its own part (61: it asked for a
            // range in decoded bytes while offering gzip, got gzip bytes from the middle of the
            // gzip stream; 33: the server ignores ranges).
            let cases: [(String, Int32)] = [("", 61), ("ifrange=ignore", 61), ("coded206=1", 61), ("ranges=none", 33)]
            for (mode, curlStatus) in cases {
                let ours = scratch.path("ours-\(curlStatus)-\(mode.count)")
                let theirs = scratch.path("theirs-\(mode.count)")
                let oursURL = server.url("/file?cut=40000&\(mode)&client=ours")
                let theirsURL = server.url("/file?cut=40000&\(mode)&client=curl")
                let cut = try await ChildProcess.run(netreach, ["get", "-q", "--retries", "0", "-o", ours, oursURL])
                #expect(cut.status == 18, "\(mode): \(cut.standardError)")
                let curlCut = try await ChildProcess.run(curl, ["-sS", "--compressed", "-o", theirs, theirsURL])
                #expect(curlCut.status == 18, "curl \(mode): \(curlCut.standardError)")
                let part = try Data(contentsOf: URL(fileURLWithPath: ours + ".part"))
                #expect(!part.isEmpty && whole.output.starts(with: part), "\(mode): \(part.count)")

                server.clear()
                let resumed = try await ChildProcess.run(netreach, ["get", "-q", "--continue", "-o", ours, oursURL])
                #expect(resumed.status == 0, "\(mode): \(resumed.standardError)")
                #expect(try Data(contentsOf: URL(fileURLWithPath: ours)) == whole.output, "\(mode)")
                let first = try #require(server.heads().first)
                #expect(CodingServer.field("Range", first) == "bytes=\(part.count)-", "\(first)")
                #expect(CodingServer.field("Accept-Encoding", first) == "identity", "\(first)")

                let curlPart = try Data(contentsOf: URL(fileURLWithPath: theirs))
                let curled = try await ChildProcess.run(
                    curl, ["-sS", "--compressed", "-C", "-", "-o", theirs, theirsURL])
                #expect(curled.status == curlStatus, "curl -C - \(mode): \(curled.standardError)")
                // curl's file is left as it was: a part, never a corrupt whole.
                #expect(try Data(contentsOf: URL(fileURLWithPath: theirs)) == curlPart, "curl \(mode)")
            }
        }
    }
}

#endif
