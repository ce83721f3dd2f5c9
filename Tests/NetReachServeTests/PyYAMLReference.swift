import Foundation
import NetReachServe
import NetReachTestSupport
import Testing

/// PyYAML, the reference ``YAMLReader`` is compared with: every document of a batch read by one
/// `python3` run, each answered with the node tree PyYAML composes (scalars with their resolved
/// tag, style and text), or why it would not read it, or which construct it read that the reader
/// refuses by design (anchors, aliases, tags, directives, complex, empty or merge keys, a key
/// given twice, nesting deeper than ``YAMLReader/maximumDepth``).
enum PyYAMLReference {
    /// What PyYAML made of one document.
    enum Verdict: Sendable {
        /// Its tree; `nil` for a stream without a document.
        case tree(PyNode?)
        /// PyYAML reads it, with a construct the reader refuses by design.
        case unsupported(String)
        /// PyYAML refuses it.
        case error(String)

        var accepts: Bool {
            if case .error = self { false } else { true }
        }
    }

    indirect enum PyNode: Sendable {
        case scalar(tag: String, style: String, text: String, value: String?)
        case sequence([PyNode])
        case mapping([(PyNode, PyNode)])
    }

    /// Whether the comparison can run: python3 with PyYAML (Debian's python3-yaml), and always
    /// under CI, where a missing reference fails the run (scripts/test.sh installs it).
    static func available() async -> Bool {
        if ProcessInfo.processInfo.environment["CI"] == "true" { return true }
        guard let python = ExternalServer.tool("python3"),
            let finished = try? await ChildProcess.run(python, ["-c", "import yaml"])
        else { return false }
        return finished.status == 0
    }

    static let script = #"""
        import json, sys, yaml
        from yaml import tokens

        class Unsupported(Exception): pass

        def explicit_construct(doc):
            found = list(yaml.scan(doc, Loader=yaml.SafeLoader))
            for i, token in enumerate(found):
                for kind, name in ((tokens.AnchorToken, 'anchor'), (tokens.AliasToken, 'alias'),
                                   (tokens.TagToken, 'tag'), (tokens.DirectiveToken, 'directive')):
                    if isinstance(token, kind): return name
                start = token.start_mark.index
                if isinstance(token, tokens.KeyToken) and doc[start] == '?' and (
                        i + 1 == len(found) or found[i + 1].start_mark.index != start):
                    return 'complex key'
            return None

        def canon(node, loader, depth):
            if isinstance(node, yaml.ScalarNode):
                if any(0xD800 <= ord(c) <= 0xDFFF for c in node.value): raise Unsupported('a surrogate escape')
                tag = node.tag.rsplit(':', 1)[-1]
                value = None
                if tag in ('null', 'bool', 'int'):
                    v = loader.construct_object(node, deep=True)
                    value = 'null' if v is None else 'true' if v is True else 'false' if v is False else str(v)
                return ['s', tag, node.style or '', node.value, value]
            if depth >= 64: raise Unsupported('nested deeper than 64')
            if isinstance(node, yaml.SequenceNode):
                return ['q', [canon(item, loader, depth + 1) for item in node.value]]
            pairs, seen = [], set()
            for key, value in node.value:
                if not isinstance(key, yaml.ScalarNode): raise Unsupported('complex key')
                if key.tag.endswith(':merge'): raise Unsupported('merge key')
                if key.value == '' and not key.style: raise Unsupported('empty key')
                constructed = loader.construct_object(key, deep=True)
                identity = (type(constructed).__name__, constructed)
                if identity in seen: raise Unsupported('duplicate key')
                seen.add(identity)
                pairs.append([canon(key, loader, depth + 1), canon(value, loader, depth + 1)])
            return ['m', pairs]

        verdicts = []
        for doc in json.load(sys.stdin):
            try:
                loader = yaml.SafeLoader(doc)
                try:
                    node = loader.get_single_node()
                    reason, tree = explicit_construct(doc), None
                    if reason is None and node is not None:
                        # Before construction, which takes merge keys out of the nodes.
                        try: tree = canon(node, loader, 0)
                        except Unsupported as found: reason = str(found)
                    # PyYAML refusing it (an unhashable key, an unknown tag) comes first.
                    if node is not None: loader.construct_document(node)
                    if reason: raise Unsupported(reason)
                    verdicts.append({'tree': tree})
                finally:
                    loader.dispose()
            except Unsupported as reason:
                verdicts.append({'unsupported': str(reason)})
            except (yaml.YAMLError, RecursionError, ValueError, TypeError) as error:
                verdicts.append({'error': type(error).__name__ + ': ' + ' '.join(str(error).split())})
        json.dump(verdicts, sys.stdout)
        """#

    /// PyYAML's verdict on each document, from one python3 run.
    static func read(_ documents: [String]) async throws -> [Verdict] {
        let python = try ExternalServer.require("python3")
        let input = try JSONSerialization.data(withJSONObject: documents)
        let finished = try await ChildProcess.run(python, ["-c", script], input: .data(input), timeout: .seconds(600))
        guard finished.status == 0 else {
            throw ExternalServerError.commandFailed("python3 (PyYAML, python3-yaml): \(finished.standardError)")
        }
        guard let verdicts = try JSONSerialization.jsonObject(with: finished.output) as? [[String: Any]],
            verdicts.count == documents.count
        else { throw ExternalServerError.commandFailed("python3 answered: \(finished.standardOutput.prefix(500))") }
        return try verdicts.map { verdict in
            if let reason = verdict["unsupported"] as? String { return .unsupported(reason) }
            if let reason = verdict["error"] as? String { return .error(reason) }
            guard verdict.keys.contains("tree") else { throw ExternalServerError.commandFailed("\(verdict)") }
            return .tree(try verdict["tree"].flatMap { $0 is NSNull ? nil : try node($0) })
        }
    }

    private static func node(_ json: Any) throws -> PyNode {
        guard let array = json as? [Any], let kind = array.first as? String else {
            throw ExternalServerError.commandFailed("not a node: \(json)")
        }
        switch kind {
        case "s":
            guard array.count == 5, let tag = array[1] as? String, let style = array[2] as? String,
                let text = array[3] as? String
            else { throw ExternalServerError.commandFailed("not a scalar: \(json)") }
            return .scalar(tag: tag, style: style, text: text, value: array[4] as? String)
        case "q":
            return .sequence(try (array[1] as? [Any] ?? []).map(node))
        default:
            return .mapping(
                try (array[1] as? [[Any]] ?? []).map { pair in
                    guard pair.count == 2 else { throw ExternalServerError.commandFailed("not a pair: \(pair)") }
                    return (try node(pair[0]), try node(pair[1]))
                })
        }
    }

    /// Where our tree and PyYAML's differ, said in words; `nil` when they do not. A plain scalar
    /// that YAML 1.1 resolves to a number or date which we keep as text (``YAMLScalar/Value``)
    /// is not a difference: its text goes in `numbersAsText`.
    static func difference(
        _ ours: YAMLNode?, _ theirs: PyNode?, at path: String = "root", numbersAsText: inout [String]
    ) -> String? {
        guard let ours, let theirs else {
            return ours == nil && theirs == nil
                ? nil : "\(path): ours \(String(describing: ours)), PyYAML's \(String(describing: theirs))"
        }
        switch (ours.content, theirs) {
        case (.scalar(let scalar), .scalar(let tag, let style, let text, let value)):
            return difference(
                scalar, tag: tag, style: style, text: text, value: value, at: path, numbersAsText: &numbersAsText)
        case (.sequence(let items), .sequence(let theirItems)):
            guard items.count == theirItems.count else {
                return "\(path): \(items.count) items, PyYAML \(theirItems.count)"
            }
            for (offset, (item, theirItem)) in zip(items, theirItems).enumerated() {
                if let found = difference(item, theirItem, at: "\(path)[\(offset)]", numbersAsText: &numbersAsText) {
                    return found
                }
            }
            return nil
        case (.mapping(let entries), .mapping(let pairs)):
            guard entries.count == pairs.count else {
                return "\(path): \(entries.map(\.key.text)) keys, PyYAML \(pairs.count)"
            }
            for (entry, (key, value)) in zip(entries, pairs) {
                let keyNode = YAMLNode(.scalar(entry.key), at: entry.keyMark)
                if let found = difference(keyNode, key, at: "\(path) key", numbersAsText: &numbersAsText) {
                    return found
                }
                if let found = difference(
                    entry.value, value, at: "\(path).\(entry.key.text)", numbersAsText: &numbersAsText)
                {
                    return found
                }
            }
            return nil
        default:
            return "\(path): ours is \(ours.kind), PyYAML's \(theirs)"
        }
    }

    private static func difference(
        _ scalar: YAMLScalar, tag: String, style: String, text: String, value: String?, at path: String,
        numbersAsText: inout [String]
    ) -> String? {
        let styles: [YAMLScalar.Style: String] = [
            .plain: "", .singleQuoted: "'", .doubleQuoted: "\"", .literal: "|", .folded: ">",
        ]
        guard styles[scalar.style] == style else { return "\(path): style \(scalar.style), PyYAML '\(style)'" }
        guard scalar.text == text else {
            return "\(path): \(scalar.text.debugDescription), PyYAML \(text.debugDescription)"
        }
        let same: Bool
        switch (scalar.value, tag) {
        case (.text, "str"): same = true
        case (.null, "null"): same = value == "null"
        case (.bool(let bool), "bool"): same = value == String(bool)
        case (.integer(let integer), "int"): same = value == String(integer)
        case (.text, "int"), (.text, "float"), (.text, "timestamp"):
            numbersAsText.append(text)
            same = true
        default: same = false
        }
        return same
            ? nil : "\(path): \(text.debugDescription) is \(scalar.value) to us, \(tag) \(value ?? "") to PyYAML"
    }
}

extension YAMLError.Reason {
    /// The reason without its details.
    var kind: YAMLReason {
        switch self {
        case .anchor: .anchor
        case .alias: .alias
        case .tag: .tag
        case .mergeKey: .mergeKey
        case .complexKey: .complexKey
        case .duplicateKey: .duplicateKey
        case .multipleDocuments: .multipleDocuments
        case .directive: .directive
        case .tabIndentation: .tabIndentation
        case .unterminatedQuote: .unterminatedQuote
        case .unterminatedFlow: .unterminatedFlow
        case .badEscape: .badEscape
        case .tooDeep: .tooDeep
        case .nonPrintable: .nonPrintable
        case .syntax: .syntax
        }
    }
}
