/// Reads the YAML that serve's configuration files are written in (`--config`, and
/// exporter-toolkit's `--web.config.file`), JSON included, into a ``YAMLNode``: a small
/// recursive-descent reader in place of a YAML library (Yams brought libyaml and all of full
/// Foundation, ICU's data with it, into an agent meant to be small).
///
/// It reads: block mappings and sequences at any consistent indentation (`- key: v` compact
/// entries too), flow mappings and sequences (`{a: 1, b: [x, y]}`, nested, across lines), plain,
/// single-quoted and double-quoted scalars (YAML's escapes, line folding), block scalars `|` and
/// `>` with chomping (`-`, `+`) and an indentation indicator, comments, `---` and `...`, a byte
/// order mark, and CRLF line ends. Scalars resolve as ``YAMLScalar/Value`` says.
///
/// It refuses, with a ``YAMLError`` naming the line and column: anchors and aliases (so no
/// document expands), merge keys, tags, directives, complex keys, a key given twice, a second
/// document, a tab in indentation, collections nested deeper than ``maximumDepth``, and anything
/// that is not YAML.
///
/// ```swift
/// let root = try YAMLReader.parse("tls_server_config:\n  cert: |\n    -----BEGIN CERTIFICATE-----\n")
/// root?["tls_server_config"]?["cert"]?.text   // "-----BEGIN CERTIFICATE-----\n"
/// ```
package struct YAMLReader {
    /// How deep collections may nest: far beyond any configuration, and shallow enough that the
    /// recursion stays small whatever the input.
    package static let maximumDepth = 64

    /// The document's root; `nil` when there is none (an empty text, comments only). A document
    /// that is `---` alone or `~` is a null scalar.
    package static func parse(_ text: String) throws(YAMLError) -> YAMLNode? {
        var reader = YAMLReader(text)
        try reader.checkCharacters()
        return try reader.document()
    }

    private let characters: [Unicode.Scalar]
    private var index = 0
    private var line = 1
    private var lineStart = 0
    private var depth = 0

    private init(_ text: String) {
        // Line ends as YAML reads them: CRLF and CR are LF, in quoted and block scalars too.
        var characters: [Unicode.Scalar] = []
        characters.reserveCapacity(text.utf8.count)
        var afterCR = false
        for character in text.unicodeScalars {
            if character == "\n", afterCR {
                afterCR = false
                continue
            }
            afterCR = character == "\r"
            characters.append(afterCR ? "\n" : character)
        }
        if characters.first == "\u{FEFF}" { characters.removeFirst() }
        self.characters = characters
    }

    // MARK: - Characters and positions

    private struct Position {
        var index: Int
        var line: Int
        var lineStart: Int
    }

    private var position: Position {
        get { Position(index: index, line: line, lineStart: lineStart) }
        set { (index, line, lineStart) = (newValue.index, newValue.line, newValue.lineStart) }
    }

    private func peek(_ offset: Int = 0) -> Unicode.Scalar? {
        index + offset < characters.count ? characters[index + offset] : nil
    }

    private var column: Int { index - lineStart }
    private var mark: YAMLMark { YAMLMark(line: line, column: column + 1) }

    private mutating func advance(_ count: Int = 1) {
        for _ in 0..<count where index < characters.count {
            if characters[index] == "\n" {
                line += 1
                lineStart = index + 1
            }
            index += 1
        }
    }

    private static func isSpace(_ character: Unicode.Scalar?) -> Bool { character == " " || character == "\t" }

    /// A space, tab, line end or the text's end: what must follow `-`, `:`, `?` to make them indicators.
    private static func isBlank(_ character: Unicode.Scalar?) -> Bool {
        character == nil || character == " " || character == "\t" || character == "\n"
    }

    private static func isFlowIndicator(_ character: Unicode.Scalar?) -> Bool {
        character == "," || character == "[" || character == "]" || character == "{" || character == "}"
    }

    private func error(_ reason: YAMLError.Reason, at mark: YAMLMark? = nil) -> YAMLError {
        YAMLError(reason, at: mark ?? self.mark)
    }

    private func syntax(_ words: String, at mark: YAMLMark? = nil) -> YAMLError {
        error(.syntax(words), at: mark)
    }

    /// What is here, for a message: `'x'`, or "the end".
    private var found: String {
        guard let character = peek() else { return "the end of the text" }
        return character == "\n" ? "the end of the line" : "'\(Character(character))'"
    }

    /// YAML's printable characters (PyYAML's check too): no C0 or C1 control but tab and line
    /// ends, no DEL, no U+FFFE or U+FFFF.
    private mutating func checkCharacters() throws(YAMLError) {
        for (offset, character) in characters.enumerated() {
            switch character.value {
            case 0x09, 0x0A, 0x20...0x7E, 0x85, 0xA0...0xD7FF, 0xE000...0xFFFD, 0x10000...0x10FFFF: continue
            default:
                advance(offset)
                throw error(.nonPrintable(character.value))
            }
        }
    }

    private mutating func skipSpaces() {
        while Self.isSpace(peek()) { advance() }
    }

    private mutating func skipComment() {
        guard peek() == "#" else { return }
        while let character = peek(), character != "\n" { advance() }
    }

    /// `---` or `...` at the start of a line.
    private func atDocumentMarker(_ marker: String? = nil) -> Bool {
        guard column == 0, let first = peek(), first == "-" || first == ".", peek(1) == first, peek(2) == first,
            Self.isBlank(peek(3))
        else { return false }
        return marker.map { $0.unicodeScalars.first == first } ?? true
    }

    /// Past spaces, line ends and comments to the next content, or the end. A tab among the
    /// spaces that indent the line it stops on is refused: YAML counts indentation in spaces.
    private mutating func skipToContent() throws(YAMLError) {
        while let character = peek() {
            if character == " " || character == "\t" || character == "\n" {
                advance()
            } else if character == "#" {
                skipComment()
            } else {
                break
            }
        }
        guard peek() != nil else { return }
        let indentation = characters[lineStart..<index]
        if indentation.allSatisfy(Self.isSpace), indentation.contains("\t") {
            throw error(
                .tabIndentation, at: YAMLMark(line: line, column: 1 + indentation.firstIndex(of: "\t")! - lineStart))
        }
    }

    /// After a value: spaces and a comment, then the line's end.
    private mutating func finishLine(after what: String) throws(YAMLError) {
        skipSpaces()
        skipComment()
        guard let character = peek(), character != "\n" else { return }
        if character == ":", Self.isBlank(peek(1)) {
            throw syntax(
                "a mapping cannot start here (\(what) then ':'): a key's value goes after its ':', and a nested "
                    + "mapping on the lines below it, indented")
        }
        throw syntax("unexpected \(found) after \(what)")
    }

    private mutating func enterCollection(at mark: YAMLMark) throws(YAMLError) {
        depth += 1
        if depth > Self.maximumDepth { throw error(.tooDeep, at: mark) }
    }

    // MARK: - The document

    private mutating func document() throws(YAMLError) -> YAMLNode? {
        try skipToContent()
        if peek() == "%", column == 0 { throw error(.directive) }
        var root: YAMLNode?
        if atDocumentMarker("---") {
            advance(3)
            root = try blockValue(parentIndent: -1, collectionsOnThisLine: true, sequenceAtParentIndent: false)
        } else if peek() != nil, !atDocumentMarker("...") {
            root = try blockNode(parentIndent: -1, collectionsOnThisLine: true)
        }
        while atDocumentMarker("...") {
            advance(3)
            try finishLine(after: "'...'")
            try skipToContent()
        }
        guard peek() != nil else { return root }
        if atDocumentMarker("---") || (peek() == "%" && column == 0) { throw error(.multipleDocuments) }
        throw syntax("unexpected \(found): the document's top level is over (check this line's indentation)")
    }

    // MARK: - Block context

    /// The value after `key:`, `- ` or `---`, on this line or indented on the lines below; a
    /// null scalar when there is none. `parentIndent` is the indentation of the collection the
    /// value belongs to (-1 at the top). Returns at the next content, or the end.
    private mutating func blockValue(
        parentIndent: Int, collectionsOnThisLine: Bool, sequenceAtParentIndent: Bool
    ) throws(YAMLError) -> YAMLNode {
        skipSpaces()
        guard let character = peek(), character != "\n", character != "#" else {
            let empty = YAMLNode(.scalar(YAMLScalar("", style: .plain)), at: mark)
            try skipToContent()
            guard peek() != nil, !atDocumentMarker() else { return empty }
            if column > parentIndent { return try blockNode(parentIndent: parentIndent, collectionsOnThisLine: true) }
            // A mapping's value may be a sequence at the mapping's own indentation.
            if sequenceAtParentIndent, column == parentIndent, peek() == "-", Self.isBlank(peek(1)) {
                return try blockSequence(indent: column)
            }
            return empty
        }
        return try blockNode(parentIndent: parentIndent, collectionsOnThisLine: collectionsOnThisLine)
    }

    /// A node that starts here: a block collection (when one may start on this line), a block
    /// scalar, a flow collection, or a scalar. Returns at the next content, or the end.
    private mutating func blockNode(parentIndent: Int, collectionsOnThisLine: Bool) throws(YAMLError) -> YAMLNode {
        let start = mark
        switch peek() {
        case "-" where Self.isBlank(peek(1)):
            guard collectionsOnThisLine else {
                throw syntax("a list cannot start on the line of its key: put its '- ' entries on the lines below")
            }
            return try blockSequence(indent: column)
        case "|", ">":
            return try blockScalar(parentIndent: parentIndent)
        case "[", "{":
            let node = try flowCollection()
            if peek() == ":", Self.isBlank(peek(1)) { throw error(.complexKey, at: start) }
            try finishLine(after: "a flow collection")
            try skipToContent()
            return node
        default:
            try refuseUnsupported(flow: false)
            if collectionsOnThisLine, implicitKeyAhead() { return try blockMapping(indent: column) }
            let node = try scalar(flow: false, parentIndent: parentIndent)
            let kind = node.scalar?.style == .plain ? "a value" : "a quoted value"
            if node.mark.line != line, peek() == ":", Self.isBlank(peek(1)) {
                throw syntax("a key must be on one line", at: node.mark)
            }
            try finishLine(after: kind)
            try skipToContent()
            return node
        }
    }

    /// Anchors, aliases, tags, complex keys, and the characters that cannot start a value.
    private func refuseUnsupported(flow: Bool) throws(YAMLError) {
        switch peek() {
        case "&": throw error(.anchor)
        case "*": throw error(.alias)
        case "!": throw error(.tag)
        case "?" where Self.isBlank(peek(1)) || (flow && Self.isFlowIndicator(peek(1))): throw error(.complexKey)
        case ":" where Self.isBlank(peek(1)) || (flow && Self.isFlowIndicator(peek(1))):
            throw syntax("a key is missing before ':'")
        case "@", "`", "%", "#", ",", "]", "}":
            throw syntax("\(found) cannot start a value; put the value in quotes")
        case "|", ">":
            throw syntax(
                flow
                    ? "block scalars (| and >) cannot be inside a flow collection; use a quoted scalar"
                    : "a block scalar (| or >) cannot be a key; put the key in quotes")
        case "-" where Self.isBlank(peek(1)) && flow:
            throw syntax("'- ' entries cannot be inside a flow collection; separate its items with commas")
        default: break
        }
    }

    /// Whether the rest of this line starts with a key: a scalar on this line, then `:` and a space.
    private func implicitKeyAhead() -> Bool {
        var at = index
        func character(_ at: Int) -> Unicode.Scalar? { at < characters.count ? characters[at] : nil }
        let first = characters[at]
        if first == "\"" || first == "'" {
            at += 1
            while let next = character(at), next != "\n" {
                if first == "\"", next == "\\" {
                    at += 2
                    continue
                }
                if next == first {
                    if first == "'", character(at + 1) == "'" {
                        at += 2
                        continue
                    }
                    break
                }
                at += 1
            }
            guard character(at) == first else { return false }
            at += 1
            while Self.isSpace(character(at)) { at += 1 }
            return character(at) == ":" && Self.isBlank(character(at + 1))
        }
        while let next = character(at), next != "\n" {
            if next == ":", Self.isBlank(character(at + 1)) { return true }
            if next == "#", at > index, Self.isSpace(characters[at - 1]) { return false }
            at += 1
        }
        return false
    }

    private mutating func blockMapping(indent: Int) throws(YAMLError) -> YAMLNode {
        let start = mark
        try enterCollection(at: start)
        defer { depth -= 1 }
        var entries: [YAMLNode.Entry] = []
        var seen: Set<YAMLScalar.Value> = []
        while true {
            let keyMark = mark
            switch peek() {
            case "[", "{": throw error(.complexKey)
            case "-" where Self.isBlank(peek(1)):
                throw syntax("expected a key of the mapping above ('key: value'), found a list entry")
            default: try refuseUnsupported(flow: false)
            }
            guard implicitKeyAhead() else {
                throw syntax("expected a key of the mapping above ('key: value'), found no ': ' on this line")
            }
            let keyNode = try scalar(flow: false, parentIndent: indent, singleLine: true)
            let key = keyNode.scalar!
            skipSpaces()
            guard peek() == ":", Self.isBlank(peek(1)) else {
                throw syntax("expected ':' after the key \"\(key.text)\"")
            }
            advance()
            try checkKey(key, at: keyMark, seen: &seen)
            let value = try blockValue(parentIndent: indent, collectionsOnThisLine: false, sequenceAtParentIndent: true)
            entries.append(YAMLNode.Entry(key: key, keyMark: keyMark, value: value))
            guard peek() != nil, !atDocumentMarker(), column >= indent else { break }
            guard column == indent else {
                throw syntax(
                    "this line is indented more than the keys of the mapping it is in (column \(indent + 1)); "
                        + "a nested mapping starts after a key that has no value on its own line")
            }
        }
        return YAMLNode(.mapping(entries), at: start)
    }

    private mutating func blockSequence(indent: Int) throws(YAMLError) -> YAMLNode {
        let start = mark
        try enterCollection(at: start)
        defer { depth -= 1 }
        var items: [YAMLNode] = []
        repeat {
            advance() // "-"
            items.append(
                try blockValue(parentIndent: indent, collectionsOnThisLine: true, sequenceAtParentIndent: false))
            guard peek() != nil, !atDocumentMarker(), column >= indent else { break }
            guard column == indent else {
                throw syntax(
                    "this line is indented more than the '- ' entries of the list it is in (column \(indent + 1))")
            }
        } while peek() == "-" && Self.isBlank(peek(1))
        return YAMLNode(.sequence(items), at: start)
    }

    /// `|` or `>`, its header, and the lines indented under it; chomping and folding as YAML says
    /// (and as PyYAML reads them). Returns at the next content, or the end.
    private mutating func blockScalar(parentIndent: Int) throws(YAMLError) -> YAMLNode {
        enum Chomping { case clip, strip, keep }
        let start = mark
        let folded = peek() == ">"
        advance()
        var chomping: Chomping?
        var increment: Int?
        for _ in 0..<2 {
            if chomping == nil, peek() == "-" || peek() == "+" {
                chomping = peek() == "-" ? .strip : .keep
                advance()
            } else if increment == nil, let digit = peek(), ("1"..."9").contains(digit) {
                increment = Int(digit.value) - 0x30
                advance()
            }
        }
        skipSpaces()
        skipComment()
        guard peek() == nil || peek() == "\n" else {
            throw syntax(
                "unexpected \(found) in a block scalar's header (| or >, then an indentation of 1-9 and - or +, in either order)"
            )
        }
        advance()
        let minimumIndent = max(parentIndent + 1, 1)
        let indent: Int
        if let increment {
            indent = minimumIndent + increment - 1
        } else {
            // The first line that is not empty sets it; empty lines before it with more spaces too.
            let saved = position
            var widest = 0
            while let character = peek(), character == " " || character == "\n" {
                advance()
                if character == " " { widest = max(widest, column) }
            }
            position = saved
            indent = max(minimumIndent, widest)
        }
        // Lines of fewer than `indent` spaces and nothing else are empty lines; each is a line end.
        func emptyLines(_ reader: inout YAMLReader) -> Int {
            var count = 0
            while true {
                while reader.column < indent, reader.peek() == " " { reader.advance() }
                guard reader.peek() == "\n" else { return count }
                reader.advance()
                count += 1
            }
        }
        var text: [Unicode.Scalar] = []
        var lineEnd = false
        var breaks = emptyLines(&self)
        while column == indent, peek() != nil {
            text.append(contentsOf: repeatElement("\n", count: breaks))
            let startsWithSpace = Self.isSpace(peek())
            while let character = peek(), character != "\n" {
                text.append(character)
                advance()
            }
            lineEnd = peek() == "\n"
            advance()
            breaks = emptyLines(&self)
            guard column == indent, peek() != nil else { break }
            if folded, lineEnd, !startsWithSpace, !Self.isSpace(peek()) {
                if breaks == 0 { text.append(" ") }
            } else {
                text.append("\n")
            }
        }
        switch chomping ?? .clip {
        case .strip: break
        case .clip: if lineEnd { text.append("\n") }
        case .keep:
            if lineEnd { text.append("\n") }
            text.append(contentsOf: repeatElement("\n", count: breaks))
        }
        try skipToContent()
        return YAMLNode(.scalar(YAMLScalar(Self.string(text), style: folded ? .folded : .literal)), at: start)
    }

    // MARK: - Flow context

    private mutating func skipFlowSpace(opening: YAMLMark) throws(YAMLError) {
        while let character = peek() {
            if character == " " || character == "\t" || character == "\n" {
                advance()
                if atDocumentMarker() { throw syntax("a document marker inside the [ or { opened at \(opening)") }
            } else if character == "#" {
                skipComment()
            } else {
                return
            }
        }
        throw error(.unterminatedFlow, at: opening)
    }

    private mutating func flowNode() throws(YAMLError) -> YAMLNode {
        if peek() == "[" || peek() == "{" { return try flowCollection() }
        try refuseUnsupported(flow: true)
        return try scalar(flow: true, parentIndent: -1)
    }

    /// `[...]` or `{...}`, across lines if need be. Returns just after its closing bracket.
    private mutating func flowCollection() throws(YAMLError) -> YAMLNode {
        let start = mark
        let isMapping = peek() == "{"
        let closing: Unicode.Scalar = isMapping ? "}" : "]"
        try enterCollection(at: start)
        defer { depth -= 1 }
        advance()
        var items: [YAMLNode] = []
        var entries: [YAMLNode.Entry] = []
        var seen: Set<YAMLScalar.Value> = []
        while true {
            try skipFlowSpace(opening: start)
            if peek() == closing { break }
            let keyMark = mark
            if isMapping, peek() == "[" || peek() == "{" { throw error(.complexKey) }
            let node = try flowNode()
            let keyLine = line
            try skipFlowSpace(opening: start)
            // A value indicator: ':' and a space, or right after a quoted key (JSON's "a":1).
            let quoted = node.scalar.map { $0.style != .plain } ?? false
            if peek() == ":", Self.isBlank(peek(1)) || Self.isFlowIndicator(peek(1)) || quoted {
                guard let key = node.scalar else { throw error(.complexKey, at: keyMark) }
                if !isMapping, line != keyLine { throw syntax("a key must be on one line", at: keyMark) }
                advance()
                try skipFlowSpace(opening: start)
                let value =
                    peek() == "," || peek() == closing
                    ? YAMLNode(.scalar(YAMLScalar("", style: .plain)), at: mark) : try flowNode()
                if isMapping {
                    try checkKey(key, at: keyMark, seen: &seen)
                    entries.append(YAMLNode.Entry(key: key, keyMark: keyMark, value: value))
                } else {
                    // [a: b]: a mapping of one pair.
                    let pair = YAMLNode.Entry(key: key, keyMark: keyMark, value: value)
                    items.append(YAMLNode(.mapping([pair]), at: keyMark))
                }
                try skipFlowSpace(opening: start)
            } else if isMapping {
                // {a, b}: keys without values.
                guard let key = node.scalar else { throw error(.complexKey, at: keyMark) }
                try checkKey(key, at: keyMark, seen: &seen)
                entries.append(
                    YAMLNode.Entry(
                        key: key, keyMark: keyMark, value: YAMLNode(.scalar(YAMLScalar("", style: .plain)), at: mark)))
            } else {
                items.append(node)
            }
            if peek() == "," {
                advance()
            } else if peek() != closing {
                throw syntax(
                    "expected ',' or '\(closing)' in the \(isMapping ? "{" : "[") opened at \(start), found \(found)")
            }
        }
        advance()
        return YAMLNode(isMapping ? .mapping(entries) : .sequence(items), at: start)
    }

    /// Refuses a merge key, and a key this mapping already has (`seen`, which it joins).
    private func checkKey(_ key: YAMLScalar, at mark: YAMLMark, seen: inout Set<YAMLScalar.Value>) throws(YAMLError) {
        if key.style == .plain, key.text == "<<" { throw error(.mergeKey, at: mark) }
        guard seen.insert(key.value).inserted else { throw error(.duplicateKey(key.text), at: mark) }
    }

    // MARK: - Scalars

    private static func string(_ characters: [Unicode.Scalar]) -> String {
        var text = String.UnicodeScalarView()
        text.append(contentsOf: characters)
        return String(text)
    }

    private mutating func scalar(flow: Bool, parentIndent: Int, singleLine: Bool = false) throws(YAMLError) -> YAMLNode
    {
        switch peek() {
        case "\"", "'": return try quoted()
        default: return try plain(flow: flow, parentIndent: parentIndent, singleLine: singleLine)
        }
    }

    /// A plain scalar: up to `: `, ` #`, the line's end (and in a flow collection, `,[]{}`),
    /// continued on the lines below that are indented more than `parentIndent` (any, in flow),
    /// folded: one line end is a space, each empty line a line end.
    private mutating func plain(flow: Bool, parentIndent: Int, singleLine: Bool) throws(YAMLError) -> YAMLNode {
        let start = mark
        var text: [Unicode.Scalar] = []
        scanning: while true {
            // This line's part: up to its last character that is not a space.
            let run = index
            var runEnd = index
            var ended = false
            while let character = peek(), character != "\n" {
                if (character == ":" && (Self.isBlank(peek(1)) || (flow && Self.isFlowIndicator(peek(1)))))
                    || (character == "#" && Self.isSpace(characters[index - 1]))
                    || (flow && Self.isFlowIndicator(character))
                {
                    ended = true
                    break
                }
                index += 1 // not a line end: the line's bookkeeping stays
                if !Self.isSpace(character) { runEnd = index }
            }
            text.append(contentsOf: characters[run..<runEnd])
            guard !ended, !singleLine, peek() == "\n" else { break }
            // The next line that is not empty continues the scalar when it is indented enough (by
            // spaces: a tab after them separates, a tab before them is left for skipToContent to refuse).
            let lineEnd = position
            var breaks = 0
            var indentation = 0
            while true {
                advance() // "\n"
                while peek() == " " { advance() }
                indentation = column
                skipSpaces()
                guard peek() == "\n" else { break }
                breaks += 1
            }
            let continues: Bool
            if let next = peek(), next != "#", !atDocumentMarker() {
                continues =
                    flow
                    ? !Self.isFlowIndicator(next) && !(next == ":" && Self.isBlank(peek(1)))
                    : indentation > parentIndent
            } else {
                continues = false
            }
            guard continues else {
                position = lineEnd
                break
            }
            if breaks == 0 {
                text.append(" ")
            } else {
                text.append(contentsOf: repeatElement("\n", count: breaks))
            }
        }
        return YAMLNode(.scalar(YAMLScalar(Self.string(text), style: .plain)), at: start)
    }

    /// A single- or double-quoted scalar, across lines if need be (folded as a plain scalar is).
    /// Returns just after its closing quote.
    private mutating func quoted() throws(YAMLError) -> YAMLNode {
        let start = mark
        let quote = peek()!
        advance()
        var text: [Unicode.Scalar] = []
        // Where the spaces and tabs not yet known to be content start: they are, unless a line end
        // follows them.
        var spaces: Int?
        while true {
            guard let character = peek() else { throw error(.unterminatedQuote, at: start) }
            if character == quote {
                if let from = spaces { text += characters[from..<index] }
                spaces = nil
                guard quote == "'", peek(1) == "'" else { break }
                text.append("'")
                advance(2)
            } else if character == "\\", quote == "\"" {
                if let from = spaces { text += characters[from..<index] }
                spaces = nil
                advance()
                if peek() == "\n" {
                    // An escaped line end: joined without a space; empty lines after it still count.
                    advance()
                    text.append(contentsOf: repeatElement("\n", count: try foldLines(opening: start)))
                } else {
                    text.append(try escape())
                }
            } else if character == "\n" {
                spaces = nil
                advance()
                let breaks = try foldLines(opening: start)
                if breaks == 0 {
                    text.append(" ")
                } else {
                    text.append(contentsOf: repeatElement("\n", count: breaks))
                }
            } else if Self.isSpace(character) {
                if spaces == nil { spaces = index }
                index += 1
            } else {
                if let from = spaces { text += characters[from..<index] }
                spaces = nil
                let run = index
                while let next = peek(), next != quote, next != "\n", !Self.isSpace(next),
                    next != "\\" || quote == "'"
                {
                    index += 1
                }
                text.append(contentsOf: characters[run..<index])
            }
        }
        advance()
        let style: YAMLScalar.Style = quote == "'" ? .singleQuoted : .doubleQuoted
        return YAMLNode(.scalar(YAMLScalar(Self.string(text), style: style)), at: start)
    }

    /// Past the indentation of a quoted scalar's next lines; how many of them were empty.
    private mutating func foldLines(opening: YAMLMark) throws(YAMLError) -> Int {
        var breaks = 0
        while true {
            if atDocumentMarker() { throw syntax("a document marker inside the quoted scalar opened at \(opening)") }
            skipSpaces()
            guard peek() == "\n" else { break }
            advance()
            breaks += 1
        }
        if peek() == nil { throw error(.unterminatedQuote, at: opening) }
        return breaks
    }

    /// YAML's escapes of one character, besides `\x`, `\u` and `\U`.
    private static let escapes: [Unicode.Scalar: Unicode.Scalar] = [
        "0": "\0", "a": "\u{07}", "b": "\u{08}", "t": "\t", "\t": "\t", "n": "\n", "v": "\u{0B}", "f": "\u{0C}",
        "r": "\r", "e": "\u{1B}", " ": " ", "\"": "\"", "/": "/", "\\": "\\", "N": "\u{85}", "_": "\u{A0}",
        "L": "\u{2028}", "P": "\u{2029}",
    ]

    /// The character a backslash escape names; at the character after the backslash.
    private mutating func escape() throws(YAMLError) -> Unicode.Scalar {
        let escapeMark = YAMLMark(line: line, column: column)
        guard let character = peek() else { throw error(.unterminatedQuote) }
        advance()
        if let named = Self.escapes[character] { return named }
        let digits: Int
        switch character {
        case "x": digits = 2
        case "u": digits = 4
        case "U": digits = 8
        default: throw error(.badEscape(String(Character(character))), at: escapeMark)
        }
        var value: UInt32 = 0
        var written = String(Character(character))
        for _ in 0..<digits {
            guard let digit = peek(), let nibble = Character(digit).hexDigitValue else {
                throw error(.badEscape(written + (peek().map { String(Character($0)) } ?? "")), at: escapeMark)
            }
            written.append(Character(digit))
            value = value << 4 | UInt32(nibble)
            advance()
        }
        guard let named = Unicode.Scalar(value) else {
            // JSON's surrogate pairs (\ud83d\ude00) name no character in YAML, as libyaml says too.
            let why =
                (0xD800...0xDFFF).contains(value)
                ? "a UTF-16 surrogate: write the character, or \\U and eight hex digits" : "beyond Unicode"
            throw error(.badEscape("\(written) (\(why))"), at: escapeMark)
        }
        return named
    }
}
