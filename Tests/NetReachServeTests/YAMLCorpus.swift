import Foundation
import Testing

/// One document of the corpus ``YAMLReaderTests`` reads with ``YAMLReader`` and with PyYAML, and
/// what the two must make of it.
struct YAMLCase: Sendable, CustomTestStringConvertible {
    enum Expectation: Sendable {
        /// PyYAML reads it, and reads the same tree.
        case same
        /// The same tree, but for plain scalars YAML 1.1 reads as numbers or dates in forms we keep
        /// as text (``YAMLScalar/Value``): these, by their text.
        case sameWithNumbersAsText([String])
        /// We refuse it with this reason; PyYAML refuses it too when `differs` is nil, and reads
        /// it when `differs` says why we deliberately do not.
        case refused(YAMLReason, differs: String?)
    }

    var name: String
    var text: String
    var expectation: Expectation

    init(_ name: String, _ text: String, _ expectation: Expectation = .same) {
        self.name = name
        self.text = text
        self.expectation = expectation
    }

    var testDescription: String { name }
}

/// ``YAMLError/Reason`` without its details.
enum YAMLReason: String, Sendable {
    case anchor, alias, tag, mergeKey, complexKey, duplicateKey, multipleDocuments, directive, tabIndentation
    case unterminatedQuote, unterminatedFlow, badEscape, tooDeep, nonPrintable, syntax
}

extension YAMLCase {
    /// The repository's own YAML files, read as they are.
    static func repositoryFile(_ path: String) -> YAMLCase {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let text = (try? String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)) ?? "missing: \(path)"
        return YAMLCase(path, text)
    }

    /// PEM text of `count` bytes, 64 characters a line, each line indented by `indent`, as a
    /// certificate or key is pasted into `cert: |`.
    static func pem(_ label: String, count: Int, indent: String) -> String {
        let bytes = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
        let base64 = Array(Data(bytes).base64EncodedString())
        let lines = stride(from: 0, to: base64.count, by: 64).map { String(base64[$0..<min($0 + 64, base64.count)]) }
        return (["-----BEGIN \(label)-----"] + lines + ["-----END \(label)-----"]).map { indent + $0 }
            .joined(separator: "\n")
    }

    static let corpus: [YAMLCase] = readmeAndDocs + exporterToolkit + constructs + scalars + refused

    static let readmeAndDocs: [YAMLCase] = [
        YAMLCase(
            "README's serve.yaml",
            """
            # /etc/netreach/serve.yaml
            listen: 127.0.0.1:9817
            to:
              db: 10.20.0.5
              api: api.internal
              dns: {host: 10.20.0.53, protocol: udp, port: 53}   # TCP to 443 unless said
            namespaces: [blue, red]   # or all_namespaces: true
            ready_when: to=db
            max_connections: 1000     # read at start only, as are idle_timeout: 75s and header_timeout: 10s

            """),
        YAMLCase(
            "README's web.yml",
            """
            # /etc/netreach/web.yml
            tls_server_config:
              cert_file: tls.crt      # relative to this file
              key_file: tls.key
              min_version: TLS12      # the default; client_auth_type and client_ca_file for client certificates
            basic_auth_users:
              prometheus: $2y$10$...  # htpasswd -nBC 10 prometheus

            """),
        YAMLCase(
            "ServeConfigFile's DocC example",
            """
            listen: 127.0.0.1:9817          # read at start only
            to:                             # --to NAME=HOST
              db: 10.0.0.5
              api: api.example.com
              dns: {host: 10.0.0.53, protocol: udp, port: 53}   # --protocol, --port (tcp, 443)
            namespaces: [blue, red]         # --namespace
            all_namespaces: false           # --all-namespaces
            ready_when: satisfied           # --ready-when
            max_connections: 1000           # --max-connections, read at start only
            idle_timeout: 75s               # --idle-timeout, read at start only
            header_timeout: 10s             # --header-timeout, read at start only
            max_probe_backoff: 30s          # --max-probe-backoff (with --internet), read at start only

            """),
        YAMLCase(
            "WebConfiguration's DocC example",
            """
            tls_server_config:
              cert_file: serve.crt             # relative paths are relative to this file
              key_file: serve.key
              client_auth_type: RequireAndVerifyClientCert   # default NoClientCert
              client_ca_file: clients.pem
              min_version: TLS12               # the default; TLS10 ... TLS13
            http_server_config:
              headers:
                Strict-Transport-Security: max-age=31536000
            basic_auth_users:
              prometheus: $2y$10$mDwo.lAisC94iLAyP81MCesa29IzH37oigHC/42V2pdJlUprsJPze

            """),
        repositoryFile("Deploy/netreach/serve.yaml"),
        repositoryFile("Deploy/netreach/web.yml"),
        // 0440 is an octal file mode to Kubernetes's YAML 1.1 reading.
        YAMLCase(
            "Deploy/kubernetes/netreach-daemonset.yaml",
            repositoryFile("Deploy/kubernetes/netreach-daemonset.yaml").text, .sameWithNumbersAsText(["0440"])),
        repositoryFile("Deploy/prometheus/prometheus.yml"),
        repositoryFile("Deploy/prometheus/netreach-rules.yml"),
        repositoryFile("Deploy/prometheus/netreach-rules.test.yml"),
        repositoryFile("Deploy/alertmanager/alertmanager.yml"),
    ]

    /// The shapes of exporter-toolkit's own web configuration files (its docs and testdata).
    static let exporterToolkit: [YAMLCase] = [
        YAMLCase(
            "exporter-toolkit's documented example",
            """
            # TLS and basic authentication configuration example.
            #
            # Additionally, a certificate and a key file are needed.
            tls_server_config:
              cert_file: server.crt
              key_file: server.key

            # Usernames and passwords required to connect.
            basic_auth_users:
              alice: $2y$10$mDwo.lAisC94iLAyP81MCesa29IzH37oigHC/42V2pdJlUprsJPze
              bob: $2y$10$hLqFl9jSjoAAy95Z/zw8Ye8wkdMBM8c5Bn1ptYqP/AXyV0.oy0S8m

            # Rate limiting requests on the endpoint using a token bucket
            rate_limit:
              interval: "1s" # time interval between two requests, set to 0 to disable rate limiter
              burst: 20 # and permits a burst of up to 20 requests.

            """),
        YAMLCase(
            "quoted values, as its testdata writes them",
            """
            tls_server_config:
              cert_file: "server.crt"
              key_file: "server.key"
              client_auth_type: "RequireAndVerifyClientCert"
              client_ca_file: "client_selfsigned.pem"

            """),
        YAMLCase(
            "a list at its key's indentation, and one indented under it",
            """
            tls_server_config:
              cert_file: "server.crt"
              key_file: "server.key"
              cipher_suites:
              - TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
              - TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384
              curve_preferences:
                - CurveP256
                - X25519
              prefer_server_cipher_suites: false
              min_version: TLS12
              max_version: TLS12
            http_server_config:
              http2: false

            """),
        YAMLCase(
            "headers, a number among them and quotes inside quotes",
            """
            http_server_config:
              headers:
                X-Frame-Options: deny
                Strict-Transport-Security: max-age=31536000; includeSubDomains
                X-Content-Type-Options: nosniff
                X-XSS-Protection: 1
                Content-Security-Policy: "default-src 'self' *.test.example.net"

            """),
        YAMLCase(
            "inline certificate and key in literal blocks",
            "tls_server_config:\n  cert: |\n" + pem("CERTIFICATE", count: 900, indent: "    ") + "\n  key: |\n"
                + pem("PRIVATE KEY", count: 1200, indent: "    ")
                + "\n  client_auth_type: \"VerifyClientCertIfGiven\"\n"),
        YAMLCase(
            "inline key last in the file, without a final line end",
            "tls_server_config:\n  cert_file: \"server.crt\"\n  key: |\n"
                + pem("PRIVATE KEY", count: 300, indent: "    ")),
        YAMLCase(
            "inline CA bundle of two certificates, stripped, in a sequence",
            "client_cas:\n- |-\n" + pem("CERTIFICATE", count: 200, indent: "  ") + "\n- |-\n"
                + pem("CERTIFICATE", count: 250, indent: "  ") + "\n"),
        YAMLCase(
            "junk: lines of text, one plain scalar",
            """
            hWkNKCp3fvIx3jKnsaBI
            TuEjdwNS8A2vYdFbiKqr
            ay3RiOtykgt4m6m3KOol
            ZreGpJRGmpDSVV9cioiF

            """),
        YAMLCase("an empty file", ""),
        YAMLCase(
            "rate limits of zero",
            "rate_limit:\n  interval: 0\n  burst: 0\n"),
        YAMLCase(
            "a misspelt key and an empty value",
            "tls_server_config:\n  cert_filse: \"server.crt\"\n  key_file:\n"),
    ]

    static let constructs: [YAMLCase] = [
        YAMLCase("comments only", "# nothing yet\n   # indented\n\n#last"),
        YAMLCase("--- alone", "---\n"),
        YAMLCase("--- and ... around a mapping", "--- # the start\nkey: value\n... # the end\n# after\n"),
        YAMLCase("a scalar on the --- line", "--- text\n"),
        YAMLCase("a literal block at the top", "--- |\n  line one\n  line two\n"),
        YAMLCase(
            "JSON on one line",
            #"{"listen":"127.0.0.1:9900","to":{"db":"10.0.0.5","dns":{"host":"10.0.0.53","port":53}},"namespaces":["blue","red"],"all_namespaces":true,"x":null}"#
        ),
        YAMLCase(
            "JSON pretty-printed",
            #"""
            {
              "to": {
                "web": "10.0.0.5",
                "list": [1, -2, 0, [], {}, [true, false, null]],
                "nested": {"a": {"b": {"c": ["d"]}}}
              },
              "escapes": "tab\tnewline\nquote\"backslash\\slash\/unicode\u00e9\ud83d\ude00"
            }
            """#,
            .refused(
                .badEscape,
                differs:
                    "a JSON surrogate pair names no character in YAML (libyaml refuses it); PyYAML keeps two halves")),
        YAMLCase(
            "JSON with escapes YAML shares",
            #"{"escapes": "tab\tnewline\nquote\"backslash\\slash\/e-acute\u00e9", "empty": "", "n": 0}"#),
        YAMLCase(
            "flow collections nested and across lines",
            """
            to: {db: 10.0.0.5, dns: {host: 10.0.0.53,
                 protocol: udp, port: 53},
              list: [a, [b, c], {d: e}, ],
            }
            more: [
              one,   # a comment inside
              two
            ]

            """),
        YAMLCase("flow sequence of pairs", "[a: 1, b: 2, c]\n"),
        YAMLCase("flow mapping of keys without values", "{a, b, c: 3}\n"),
        YAMLCase("empty flow collections", "a: {}\nb: []\nc: { }\nd: [ ]\n"),
        YAMLCase(
            "sequences of mappings, compact",
            """
            - name: a
              value: 1
              nested:
                deeper: true
            - name: b
            -   name: c
                value: 3
            - - x
              - y
            - - - z

            """),
        YAMLCase(
            "a mapping's list at the mapping's indentation",
            "items:\n- a\n- b\nnext:\n- key: v\n  other: w\n- c\nlast: 1\n"),
        YAMLCase("indentation of one space", "a:\n b:\n  c: 1\n d: [x]\ne: 2\n"),
        YAMLCase("indentation of four spaces", "a:\n    b:\n        c: 1\n    d:\n        - x\n        - y\n"),
        YAMLCase("empty entries and values", "-\n- a\n-\n- key:\n  other: ~\n"),
        YAMLCase(
            "comments everywhere",
            """
            # head
            a: 1 # after a value
            # between
            b: # after a key
              # before a nested key
              c: 2
            d:
              - x # after an entry
              # between entries
              - y
            e: [1, # inside a flow
                2]
            f: | # after a block header
              text
            # tail
            """),
        YAMLCase("a # without a space before it is text", "a: b#c\nd: '#e'\nf: g #h\nurl: http://x/#frag\n"),
        YAMLCase(
            "CRLF line ends",
            "tls_server_config:\r\n  cert_file: tls.crt\r\n  key: |\r\n    line one\r\n    line two\r\nbasic_auth_users:\r\n  a: b\r\n"
        ),
        YAMLCase("a byte order mark", "\u{FEFF}listen: 127.0.0.1:9817\nto: {db: 10.0.0.5}\n"),
        YAMLCase(
            "trailing spaces everywhere",
            "a: value   \nb:    \n  c: 1  \n   \nd: [x, y]   \ne: 'q'  \nf: |  \n  text  \n  \ng: end\n"),
        YAMLCase("document end then comments", "a: 1\n...\n# done\n"),
        YAMLCase(
            "nested ten deep",
            "a:\n b:\n  c:\n   d:\n    e:\n     f:\n      g:\n       h:\n        i:\n         j: deep\n"),
        YAMLCase(
            "a deep flow nesting within the limit",
            String(repeating: "[", count: 60) + String(repeating: "]", count: 60)),
        YAMLCase(
            "keys of every kind of scalar",
            "1: one\nyes: bool\n~: null\n\"quoted\": q\n'single': s\nkey with spaces: v\n"),
        YAMLCase("quoted keys with colons and spaces", "\"a b\": 1\n'c:d': 2\n\"e\" : 3\n"),
        YAMLCase("a long line", "key: " + String(repeating: "abcdefghij ", count: 300) + "end\n"),
        YAMLCase(
            "an Alertmanager-like route tree",
            """
            route:
              receiver: default
              group_by: ['alertname', host]
              routes:
                - matchers: ['severity="page"']
                  receiver: pager
                  continue: true
                - receiver: 'null'
            receivers:
              - name: default
              - name: pager
                webhook_configs: [{url: 'http://127.0.0.1:5001/'}]

            """),
        YAMLCase("spacing around values", "key:    value   # comment\nlist:   [ a ,b ,  c ]\n"),
    ]

    static let scalars: [YAMLCase] = [
        YAMLCase(
            "nulls",
            "a: ~\nb: null\nc: Null\nd: NULL\ne:\nf: [~, null, ]\ng: {h: }\nquoted: '~'\nother: nil\n"),
        YAMLCase(
            "booleans, YAML 1.1's included, and look-alikes that are text",
            """
            a: true
            b: True
            c: TRUE
            d: false
            e: yes
            f: No
            g: ON
            h: off
            i: "true"
            j: 'yes'
            k: y
            l: n
            m: tRUE
            n: Yes please

            """),
        YAMLCase("decimal integers", "a: 0\nb: -1\nc: +7\nd: 53\ne: 9817\nf: 1000000000000\ng: '53'\nh: \"-1\"\n"),
        YAMLCase(
            "numbers YAML 1.1 reads in forms kept as text",
            "hex: 0x1F\noctal: 017\nunderscore: 1_000\nsexagesimal: 1:30\nfloat: 1.5\nexp: 1e3\ninf: .inf\nmode: 0440\n",
            .sameWithNumbersAsText(["0x1F", "017", "1_000", "1:30", "1.5", ".inf", "0440"])),
        YAMLCase("a date", "when: 2001-12-14\nquoted: '2001-12-14'\n", .sameWithNumbersAsText(["2001-12-14"])),
        YAMLCase(
            "plain scalars with indicators inside",
            """
            url: http://127.0.0.1:9817/metrics?x=1&y=2
            dash: -dash
            question: ?q
            colon: :colon
            percent: 50%
            at: x@y
            star: a*b
            bang: a!b
            amp: a&b
            brackets: a[0]{1}
            quote: it's "fine"
            host: '[::1]:9900'
            time: 12:30

            """, .sameWithNumbersAsText(["12:30"])),
        YAMLCase(
            "a list entry after a plain scalar over several lines",
            """
            a: this is
              one scalar
              over three lines
            b: with

              an empty line between
            - not: a list
            """, .refused(.syntax, differs: nil)),
        YAMLCase(
            "plain scalars over several lines, folded",
            "a: this is\n  one scalar\n  over three lines\nb: with\n\n  an empty line between\n\n\n  and two\nc:\n  on its own\n  lines\n"
        ),
        YAMLCase(
            "single quotes",
            "a: 'it''s'\nb: ''\nc: 'folded\n  over\n\n  lines'\nd: '  spaces kept  '\ne: 'back\\slash is text'\n"),
        YAMLCase(
            "double quotes and every escape",
            #"""
            a: "\n\t\"\\\/\x41\u00e9\U0001F600"
            b: "\0\a\b\v\f\r\e\N\_\L\P\ \\#tend"
            c: "folded
              over

              lines"
            d: "escaped \
              line end"
            e: "  spaces kept  "
            f: ""
            g: "trailing spaces before a fold\#u{20}\#u{20}
              are dropped"

            """#),
        YAMLCase(
            "literal blocks and chomping",
            """
            clip: |
              one
              two

            strip: |-
              one
              two

            keep: |+
              one
              two


            indented: |2
                four spaces, two kept
              two
            more: |
              first

                more indented
              last
            empty: |
            after: x

            """),
        YAMLCase(
            "folded blocks and chomping",
            """
            clip: >
              one
              two

              after an empty line
                more indented
                kept
              back
            strip: >-
              one
              two

            keep: >+
              one


            explicit: >1-
              leading space kept
            header comment: > # a comment
              text

            """),
        YAMLCase("block scalars in a list", "- |\n  a\n  b\n- >-\n  c\n  d\n- |+\n  e\n\n- last\n"),
        YAMLCase("unicode text", "name: café ☕ 日本語\n\"ключ\": значение\nemoji: \"\\U0001F30D\"\n😀: smile\n"),
        YAMLCase("a tab in quotes, and after a block's indentation", "b: \"\tz\"\nc: |\n  \tindented by a tab\n"),
    ]

    static let refused: [YAMLCase] = [
        YAMLCase(
            "anchors and aliases",
            "base: &base {a: 1}\nother: *base\n", .refused(.anchor, differs: "aliases are not read, so nothing expands")
        ),
        YAMLCase(
            "an alias bomb",
            (["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
                + (1..<9).map { level in
                    let previous = Character(Unicode.Scalar(UInt8(ascii: "a") + UInt8(level - 1)))
                    let name = Character(Unicode.Scalar(UInt8(ascii: "a") + UInt8(level)))
                    return "\(name): &\(name) [" + Array(repeating: "*\(previous)", count: 9).joined(separator: ", ")
                        + "]"
                }).joined(separator: "\n") + "\n",
            .refused(.anchor, differs: "PyYAML shares the nodes; a reader that copies them would expand 9^9")),
        YAMLCase("an alias alone", "a: *nowhere\n", .refused(.alias, differs: nil)),
        YAMLCase(
            "a merge key", "<<: {a: 1}\nb: 2\n", .refused(.mergeKey, differs: "YAML 1.1's merge keys are not read")),
        YAMLCase("a standard tag", "a: !!str 123\n", .refused(.tag, differs: "tags are not read")),
        YAMLCase("a local tag", "a: !secret x\n", .refused(.tag, differs: nil)),
        YAMLCase("a second document", "a: 1\n---\nb: 2\n", .refused(.multipleDocuments, differs: nil)),
        YAMLCase("an empty second document", "a: 1\n---\n", .refused(.multipleDocuments, differs: nil)),
        YAMLCase(
            "a key given twice",
            "basic_auth_users:\n  alice: x\n  alice: y\n",
            .refused(.duplicateKey, differs: "PyYAML keeps the last; yaml.v2's UnmarshalStrict refuses it")),
        YAMLCase(
            "a key given twice in a flow mapping", "{a: 1, b: 2, a: 3}",
            .refused(.duplicateKey, differs: "PyYAML keeps the last")),
        YAMLCase(
            "the same key written two ways", "true: a\nyes: b\n",
            .refused(.duplicateKey, differs: "PyYAML keeps the last")),
        YAMLCase("a complex key", "? a\n: b\n", .refused(.complexKey, differs: "complex keys are not read")),
        YAMLCase("a list as a key", "[a, b]: c\n", .refused(.complexKey, differs: nil)),
        YAMLCase("a mapping as a flow key", "{[a]: b}\n", .refused(.complexKey, differs: nil)),
        YAMLCase("an empty key", ": v\n", .refused(.syntax, differs: nil)),
        YAMLCase("an empty key in a flow mapping", "{: v}\n", .refused(.syntax, differs: nil)),
        YAMLCase("a tab in indentation", "a:\n\tb: 1\n", .refused(.tabIndentation, differs: nil)),
        YAMLCase(
            "a tab after spaces in indentation", "a:\n  b: 1\n \t c: 2\n", .refused(.tabIndentation, differs: nil)),
        YAMLCase("an unterminated double quote", "a: \"open\nb: 1\n", .refused(.unterminatedQuote, differs: nil)),
        YAMLCase("an unterminated single quote", "a: 'open\n", .refused(.unterminatedQuote, differs: nil)),
        YAMLCase("an unterminated flow sequence", "a: [1, 2\n", .refused(.unterminatedFlow, differs: nil)),
        YAMLCase("an unterminated flow mapping", "to: {db: 10.0.0.5\n", .refused(.unterminatedFlow, differs: nil)),
        YAMLCase("a bad escape", "a: \"\\q\"\n", .refused(.badEscape, differs: nil)),
        YAMLCase("a short hex escape", "a: \"\\xZZ\"\n", .refused(.badEscape, differs: nil)),
        YAMLCase(
            "a %YAML directive", "%YAML 1.1\n---\na: 1\n", .refused(.directive, differs: "directives are not read")),
        YAMLCase(
            "flow collections 100 deep", String(repeating: "[", count: 100) + String(repeating: "]", count: 100),
            .refused(.tooDeep, differs: "deeper than 64 is refused")),
        YAMLCase("a control character", "a: b\u{01}c\n", .refused(.nonPrintable, differs: nil)),
        YAMLCase("a list on its key's line", "key: - a\n", .refused(.syntax, differs: nil)),
        YAMLCase("a mapping on its key's line", "a: b: c\n", .refused(.syntax, differs: nil)),
        YAMLCase("a key indented less than its mapping", "a:\n  b: 1\n c: 2\n", .refused(.syntax, differs: nil)),
        YAMLCase("a key after a list at the top", "- a\nb: c\n", .refused(.syntax, differs: nil)),
        YAMLCase("a reserved indicator", "a: @foo\n", .refused(.syntax, differs: nil)),
        YAMLCase("text after a quoted value", "a: \"x\" y\n", .refused(.syntax, differs: nil)),
        YAMLCase("a block scalar in a flow", "[|\n  a\n]", .refused(.syntax, differs: nil)),
        YAMLCase("a document marker in a quoted scalar", "a: \"x\n---\ny\"\n", .refused(.syntax, differs: nil)),
    ]
}
