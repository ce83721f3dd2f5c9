#!/usr/bin/env python3
"""Writes netreach(1), a man page in man(7) format, from what the executable says of itself
(`netreach --experimental-dump-help`: swift-argument-parser's description of every command,
the same text --help prints), so the page cannot drift from --help.

    scripts/make-manpage.py .build/debug/netreach > netreach.1
"""
import json
import subprocess
import sys


def escape(text):
    """Roff-safe text: backslashes, hyphens as minus signs, no line starting with . or '."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    lines = []
    for line in text.split("\n"):
        if line.startswith((".", "'")):
            line = "\\&" + line
        lines.append(line)
    return "\n".join(lines)


def paragraphs(text):
    """Discussion text: blank lines become paragraphs; indented lines keep their layout."""
    out = []
    for block in text.strip().split("\n\n"):
        lines = block.split("\n")
        if any(line.startswith("  ") for line in lines):
            out.append(".PP\n.nf\n" + escape(block) + "\n.fi")
        else:
            out.append(".PP\n" + escape(" ".join(line.strip() for line in lines)))
    return "\n".join(out)


def option_names(argument):
    names = []
    for name in argument.get("names", []):
        prefix = "--" if name["kind"] == "long" else "-"
        names.append(prefix + name["name"])
    return names


def options(command):
    out = []
    for argument in command.get("arguments", []):
        if not argument.get("shouldDisplay", True):
            continue
        names = option_names(argument)
        value = argument.get("valueName", "")
        if argument["kind"] == "positional":
            label = "\\fI" + escape(value) + "\\fR"
        elif argument["kind"] == "flag":
            label = ", ".join("\\fB" + escape(n) + "\\fR" for n in names)
        else:
            label = ", ".join("\\fB" + escape(n) + "\\fR \\fI" + escape(value) + "\\fR" for n in names)
        out.append(".TP\n" + label + "\n" + escape(argument.get("abstract", "")))
    return "\n".join(out)


def main():
    executable = sys.argv[1]
    dump = json.loads(subprocess.run([executable, "--experimental-dump-help"], check=True,
                                     capture_output=True, text=True).stdout)
    root = dump["command"]
    version = subprocess.run([executable, "--version"], check=True, capture_output=True,
                             text=True).stdout.strip()
    page = [
        '.TH NETREACH 1 "" "netreach %s" "User Commands"' % escape(version),
        ".SH NAME",
        "netreach \\- " + escape(root["abstract"].rstrip(".")),
        ".SH SYNOPSIS",
        ".B netreach",
        "\\fIcommand\\fR [\\fIoptions\\fR]",
        ".SH DESCRIPTION",
        paragraphs(root.get("discussion", "")),
        ".SH COMMANDS",
    ]
    for command in root.get("subcommands", []):
        if not command.get("shouldDisplay", True) or command["commandName"] == "help":
            continue
        page.append(".SS netreach " + escape(command["commandName"]))
        page.append(escape(command.get("abstract", "")))
        page.append(paragraphs(command.get("discussion", "")))
        page.append(options(command))
    page.append(".SH SEE ALSO")
    page.append("\\fBip\\fR(8), \\fBsystemd.service\\fR(5), \\fBprometheus\\fR(1)")
    print("\n".join(part for part in page if part))


if __name__ == "__main__":
    main()
