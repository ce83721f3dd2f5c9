#!/usr/bin/env python3
"""Extracts the Swift snippets of the README and the DocC articles into Tests/SnippetChecks.

Every ```swift block of README.md and of Sources/*/*.docc/*.md becomes the body of its own
`func snippet_<doc>_<n>() async throws`, so `swift build --build-tests` type-checks every snippet
against the real NetReach, NetReachTesting, NetReachHTTP and NetReachAsyncHTTPClient.
Placeholders the snippets use (`service`, `render(_:)`, `Item`, ...) are declared by hand in
Tests/SnippetChecks/Stubs.swift.

Each snippet is compiled with exactly the imports a reader sees: a snippet with `import` lines
starts a generated file of its own (Tests/SnippetChecks/Generated_<doc>_<n>.swift, imports are
per file in Swift), and the snippets after it that import nothing continue it, as the text reads
them. Nothing is added, not even Foundation (which once hid a snippet that needed Dispatch from a
module that did not re-export it); only an article of a DocC catalog also imports the catalog's
module, as its reader has it in mind. Snippets before the first `import` of a document are a file
of their own with that import alone (none for the README).

How a snippet is turned into a function:
- `import` lines, and `#if` blocks of nothing but imports, move to the top of its file.
- Type declarations (struct, class, enum, actor, protocol, extension) at the snippet's top level
  move to file scope, `fileprivate` unless they say otherwise, so later snippets of the same
  document can use them and two documents may reuse a name.
- Values the snippet only shows would be warnings (the build fails on warnings in Tests/): each
  top-level `let`/`var` is read once at the end (`_ = name`), and a top-level statement that is a
  bare member expression (`path.isExpensive`, `path.usesInterfaceType(.cellular)`) is passed to
  a no-op `discardResult(_:)`, which, unlike `_ =`, takes Void results without a warning too.

A snippet that cannot compile (code for Apple platforms only, pseudo-code) is marked in the
Markdown with `<!-- snippet: skip (reason) -->` on the line before its fence; the reason is
required. Fences in other languages (```sh, plain ```) are not Swift and are left alone.

Usage: scripts/extract-snippets.py           regenerate Tests/SnippetChecks/Generated_*.swift
       scripts/extract-snippets.py --check   exit 1 if they are not what it would generate
Exits 2 when a document cannot be read (a block never closed, a skip marker without a reason).
"""

import glob
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
OUTPUT_DIR = os.path.join("Tests", "SnippetChecks")
GENERATED_PREFIX = "Generated_"

FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\s]*)[^`]*$")
SKIP = re.compile(r"^\s*<!--\s*snippet:\s*skip\s*\((?P<reason>.*\S.*)\)\s*-->\s*$")
DIRECTIVE = re.compile(r"^\s*<!--\s*snippet\b")
IMPORT = re.compile(
    r"^(?:@\w+(?:\([^)]*\))?\s+)*import\s+"
    r"(?:(?:struct|class|enum|protocol|typealias|func|var|let)\s+)?[\w.]+\s*(?://.*)?$")
TYPE_DECLARATION = re.compile(
    r"^(?P<modifiers>(?:(?:public|package|internal|fileprivate|private|open|final|indirect|"
    r"nonisolated)\s+)*)(?P<kind>struct|class|enum|actor|protocol|extension)\s+\w")
ACCESS = {"public", "package", "internal", "fileprivate", "private", "open"}
BINDING = re.compile(r"^(?:let|var)\s+(?P<name>[A-Za-z_]\w*)\s*(?::[^=]*)?=")
IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
KEYWORDS = {
    "as", "async", "await", "break", "case", "catch", "class", "continue", "default", "defer",
    "do", "else", "enum", "extension", "fallthrough", "false", "for", "func", "guard", "if",
    "import", "in", "init", "is", "let", "nil", "repeat", "return", "self", "Self", "struct",
    "super", "switch", "throw", "true", "try", "var", "where", "while",
}


class SnippetError(Exception):
    pass


# Reading Markdown ---------------------------------------------------------------------------------

class Snippet:
    def __init__(self, number, first_line, lines, skip_reason):
        self.number = number            # 1-based among the document's ```swift blocks
        self.first_line = first_line    # line of the first line of code in the Markdown file
        self.lines = lines
        self.skip_reason = skip_reason


def read_snippets(path):
    """The ```swift blocks of a Markdown file, with their skip markers."""
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        lines = f.read().split("\n")
    snippets = []
    pending_skip = None     # (reason, line number) of a marker waiting for its fence
    number = 0
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = FENCE.match(line)
        if not fence:
            skip = SKIP.match(line)
            if skip:
                if pending_skip:
                    raise SnippetError(f"{path}:{pending_skip[1]}: skip marker not followed by a ```swift block")
                pending_skip = (skip.group("reason").strip(), i + 1)
            elif DIRECTIVE.match(line):
                raise SnippetError(f"{path}:{i + 1}: unknown snippet marker; write <!-- snippet: skip (reason) -->")
            elif line.strip() and pending_skip:
                raise SnippetError(f"{path}:{pending_skip[1]}: skip marker not followed by a ```swift block")
            i += 1
            continue
        indent, marker, info = fence.group("indent"), fence.group("fence"), fence.group("info")
        end = i + 1
        closing = re.compile(r"^[ \t]*" + re.escape(marker[0]) + "{" + str(len(marker)) + r",}[ \t]*$")
        while end < len(lines) and not closing.match(lines[end]):
            end += 1
        if end == len(lines):
            raise SnippetError(f"{path}:{i + 1}: code block never closed")
        body = [strip_indent(l, indent) for l in lines[i + 1:end]]
        if info == "swift":
            number += 1
            reason = pending_skip[0] if pending_skip else None
            snippets.append(Snippet(number, i + 2, body, reason))
        elif info.startswith("swift"):
            raise SnippetError(f"{path}:{i + 1}: ```{info}: write ```swift, preceded by "
                               "<!-- snippet: skip (reason) --> if it cannot compile")
        elif pending_skip:
            raise SnippetError(f"{path}:{pending_skip[1]}: skip marker not followed by a ```swift block")
        pending_skip = None
        i = end + 1
    if pending_skip:
        raise SnippetError(f"{path}:{pending_skip[1]}: skip marker not followed by a ```swift block")
    return snippets


def strip_indent(line, indent):
    return line[len(indent):] if line.startswith(indent) else line.lstrip(" \t")


# Reading Swift, just enough -----------------------------------------------------------------------

class LineInfo:
    def __init__(self):
        self.depth_at_start = 0     # (), [] and {} open before the line, outside strings and comments
        self.depth_at_end = 0
        self.starts_in_code = True  # not inside a string or a block comment
        self.code = []              # per character: code outside any string and comment
        self.comment = None         # where a trailing // comment starts


def analyze(lines):
    """Brackets, strings (with interpolations) and comments, line by line."""
    infos = []
    depth = 0
    stack = []          # open strings and interpolations, innermost last
    block_comments = 0
    for line in lines:
        info = LineInfo()
        info.depth_at_start = depth
        info.starts_in_code = not stack and block_comments == 0
        info.code = [False] * len(line)
        i = 0
        while i < len(line):
            top = stack[-1] if stack else None
            if block_comments:
                if line.startswith("*/", i):
                    block_comments -= 1
                    i += 2
                elif line.startswith("/*", i):
                    block_comments += 1
                    i += 2
                else:
                    i += 1
                continue
            if top and top[0] == "string":
                _, close, escape = top
                if line.startswith(escape + "(", i):
                    stack.append(["interpolation", 0])
                    i += len(escape) + 1
                elif line.startswith(escape, i):
                    i += len(escape) + 1
                elif line.startswith(close, i):
                    stack.pop()
                    i += len(close)
                else:
                    i += 1
                continue
            # Code: at the top level, or inside an interpolation.
            string = re.compile(r'(#*)("""|")').match(line, i)
            if line.startswith("//", i):
                if not top:
                    info.comment = i
                break
            if line.startswith("/*", i):
                block_comments += 1
                i += 2
                continue
            if string and (string.group(1) or line[i] == '"'):
                hashes, quotes = string.group(1), string.group(2)
                stack.append(["string", quotes + hashes, "\\" + hashes])
                i = string.end()
                continue
            c = line[i]
            if top:     # interpolation
                if c == "(":
                    top[1] += 1
                elif c == ")":
                    if top[1] == 0:
                        stack.pop()
                    else:
                        top[1] -= 1
            else:
                info.code[i] = True
                if c in "([{":
                    depth += 1
                elif c in ")]}":
                    depth -= 1
            i += 1
        info.depth_at_end = depth
        infos.append(info)
    return infos


def code_part(line, info):
    """The line without its trailing // comment."""
    return line if info.comment is None else line[:info.comment]


def split_statements(text, code):
    """Splits at the `;`s that are code, outside brackets."""
    pieces, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if not code[i]:
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == ";" and depth == 0:
            pieces.append((start, i))
            start = i + 1
    pieces.append((start, len(text)))
    return pieces


def is_member_expression(text, code, start, end):
    """`a.b`, `a?.b(c)[d].e()`, ...: a bare expression whose value the statement drops."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    root = IDENTIFIER.match(text, start, end)
    if not root or root.group() in KEYWORDS:
        return False
    i, members = root.end(), 0
    while i < end:
        if text.startswith("?.", i) or text[i] == ".":
            i += 2 if text[i] == "?" else 1
            member = IDENTIFIER.match(text, i, end)
            if not member:
                return False
            i, members = member.end(), members + 1
        elif text[i] == "!" and not text.startswith("!=", i):
            i += 1
        elif text[i] in "([" and code[i]:
            close, depth = i, 0
            while close < end:
                if code[close] and text[close] in "([{":
                    depth += 1
                elif code[close] and text[close] in ")]}":
                    depth -= 1
                    if depth == 0:
                        break
                close += 1
            if close == end:
                return False
            i = close + 1
        else:
            return False
    return members > 0


# Writing Swift ------------------------------------------------------------------------------------

class Document:
    def __init__(self, path, name, module):
        self.path = path        # relative to the package root, with /
        self.name = name        # README, NetReach_LinuxPathSemantics, ...
        self.module = module    # the DocC catalog's module, or None


def documents():
    found = [Document("README.md", "README", None)]
    for path in sorted(glob.glob(os.path.join(ROOT, "Sources", "*", "*.docc", "*.md"))):
        relative = os.path.relpath(path, ROOT).replace(os.sep, "/")
        catalog = os.path.basename(os.path.dirname(path))[:-len(".docc")]
        stem = os.path.splitext(os.path.basename(path))[0]
        name = re.sub(r"\W", "_", f"{catalog}_{stem}")
        found.append(Document(relative, name, catalog))
    return found


def convert(document, snippet):
    """(imports, declarations, body) of one snippet; declarations and body are lists of lines."""
    lines = snippet.lines
    infos = analyze(lines)
    imports, declarations, body, bindings = [], [], [], []
    uses_discard = False
    where = f"{document.path}:{snippet.first_line}"

    def statement_start(k):
        line, info = lines[k], infos[k]
        if not (info.depth_at_start == 0 and info.starts_in_code and line[:1].strip() != ""
                and not line.startswith(("}", ")", "]", "."))):
            return False
        previous = next((code_part(lines[j], infos[j]).rstrip() for j in range(k - 1, -1, -1)
                         if code_part(lines[j], infos[j]).strip()), "")
        return not previous.endswith(tuple("=+-*/%&|^,.("))   # else it continues that line

    k = 0
    while k < len(lines):
        line, info = lines[k], infos[k]
        if not statement_start(k):
            body.append(line)
            k += 1
            continue
        text = code_part(line, info).rstrip()

        if IMPORT.match(line):
            imports.append(text)
            k += 1
            continue

        if line.startswith("#if"):     # a block of conditional imports moves as one
            end, nesting = k + 1, 1
            while end < len(lines):
                stripped = lines[end].strip()
                if stripped.startswith("#if"):
                    nesting += 1
                elif stripped.startswith("#endif"):
                    nesting -= 1
                    if nesting == 0:
                        break
                end += 1
            inner = [l.strip() for l in lines[k + 1:end]]
            if end < len(lines) and all(not l or l.startswith(("#else", "#elseif")) or IMPORT.match(l)
                                        for l in inner):
                imports.append("\n".join(l.rstrip() for l in lines[k:end + 1]))
                k = end + 1
                continue

        declaration = TYPE_DECLARATION.match(line)
        if declaration:
            first = k       # with the doc comment and attributes directly above it
            while first > 0 and lines[first - 1].startswith(("///", "@")) and body and body[-1] == lines[first - 1]:
                first -= 1
                body.pop()
            end, opened = k, False
            while end < len(lines):
                opened = opened or any(c == "{" and infos[end].code[i] for i, c in enumerate(lines[end]))
                if opened and infos[end].depth_at_end == 0:
                    break
                end += 1
            if end == len(lines):
                raise SnippetError(f"{where}: cannot find the end of the declaration on its line {k + 1}")
            declared = lines[first:end + 1]
            if declaration.group("kind") != "extension" and not set(declaration.group("modifiers").split()) & ACCESS:
                declared[k - first] = "fileprivate " + declared[k - first]
            declarations.append((snippet.first_line + first, snippet.first_line + end, declared))
            k = end + 1
            continue

        for a, b in split_statements(text, info.code):
            binding = BINDING.match(text[a:b].strip())
            if binding and binding.group("name") not in bindings:
                bindings.append(binding.group("name"))

        # A bare expression, complete on this line, whose value would be unused.
        next_code = next((l for l in lines[k + 1:] if l.strip() and not l.strip().startswith("//")), "")
        if info.depth_at_end == 0 and not next_code.lstrip().startswith("."):
            pieces = split_statements(text, info.code)
            wrapped = [is_member_expression(text, info.code, a, b) for a, b in pieces]
            if any(wrapped):
                uses_discard = True
                new = "; ".join(f"discardResult({text[a:b].strip()})" if w else text[a:b].strip()
                                for (a, b), w in zip(pieces, wrapped))
                comment = line[len(text):].lstrip()
                column = len(line) - len(comment)
                line = new + (" " * max(1, column - len(new)) + comment if comment else "")
        body.append(line)
        k += 1

    while body and not body[-1].strip():
        body.pop()
    while body and not body[0].strip():
        body.pop(0)
    if bindings:
        body.append("_ = " + "; _ = ".join(bindings) + "   // the snippet may only show these")
    return imports, declarations, body, uses_discard


def generate(document):
    """{file name: text} for a document: one file per group of snippets that share imports."""
    snippets = read_snippets(document.path)
    header = [
        f"// Generated by scripts/extract-snippets.py from {document.path}: do not edit.",
        "// Each ```swift block is the body of a function, so that building the tests checks it compiles,",
        "// with the imports the document shows it (and nothing more); placeholders it uses are in",
        "// Stubs.swift. Regenerate after changing the document.",
    ]
    base_imports = [f"import {document.module}"] if document.module else []
    groups = []     # [first line, imports, sections, uses_discard]
    for snippet in snippets:
        last = snippet.first_line + len(snippet.lines) - 1
        if snippet.skip_reason:
            if not groups:
                groups.append([snippet.first_line, list(base_imports), [], False])
            groups[-1][2].append(f"// {document.path}:{snippet.first_line}-{last} is not compiled: {snippet.skip_reason}")
            continue
        snippet_imports, declarations, body, discards = convert(document, snippet)
        if snippet_imports or not groups:
            imports = list(base_imports)
            for line in snippet_imports:
                if line not in imports:
                    imports.append(line)
            groups.append([snippet.first_line, imports, [], False])
        group = groups[-1]
        group[3] = group[3] or discards
        parts = []
        for first, end, declared in declarations:
            parts.append(f"// {document.path}:{first}-{end}, at file scope so later snippets can use it")
            parts.append("\n".join(declared))
            parts.append("")
        parts.append(f"// {document.path}:{snippet.first_line}-{last}")
        parts.append(f"func snippet_{document.name}_{snippet.number}() async throws {{")
        parts.extend(("    " + l).rstrip() for l in body)
        parts.append("}")
        group[2].append("\n".join(parts))

    if not groups:
        return {f"{GENERATED_PREFIX}{document.name}.swift":
                "\n".join(header + [f"// {document.path} has no Swift snippets."]) + "\n"}
    files = {}
    for number, (first_line, imports, sections, uses_discard) in enumerate(groups, start=1):
        out = header + [""] + (imports + [""] if imports else [])
        if uses_discard:
            out += ["/// Takes the value of a bare expression that a snippet shows; Void too, unlike `_ =`.",
                    "private func discardResult<T>(_ value: T) {}", ""]
        out.append("\n\n".join(sections))
        # Numbered, not named by line: editing the text above a snippet must not rename its file.
        files[f"{GENERATED_PREFIX}{document.name}_{number}.swift"] = "\n".join(out) + "\n"
    return files


def main(argv):
    check = argv[1:] == ["--check"]
    if argv[1:] and not check:
        print(__doc__.strip().split("\n\n")[-1], file=sys.stderr)
        return 2
    try:
        wanted = {}
        for document in documents():
            wanted.update(generate(document))
    except SnippetError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    directory = os.path.join(ROOT, OUTPUT_DIR)
    existing = {os.path.basename(p) for p in glob.glob(os.path.join(directory, GENERATED_PREFIX + "*.swift"))}
    differing = []
    for name, text in sorted(wanted.items()):
        path = os.path.join(directory, name)
        current = None
        if name in existing:
            with open(path, encoding="utf-8") as f:
                current = f.read()
        if current != text:
            differing.append(name)
            if not check:
                os.makedirs(directory, exist_ok=True)
                with open(path, "w", encoding="utf-8") as f:
                    f.write(text)
    for name in sorted(existing - wanted.keys()):
        differing.append(name)
        if not check:
            os.remove(os.path.join(directory, name))
    if check:
        for name in differing:
            print(f"{OUTPUT_DIR}/{name} is not what scripts/extract-snippets.py generates", file=sys.stderr)
        return 1 if differing else 0
    for name in differing:
        print(f"wrote {OUTPUT_DIR}/{name}" if name in wanted else f"removed {OUTPUT_DIR}/{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
