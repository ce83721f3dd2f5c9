#!/usr/bin/env bash
# Formats the package's Swift sources with swift-format and the checked-in .swift-format, or with
# --check, fails (listing each place) when any file is not formatted so. scripts/test.sh runs the
# check. Left out: Tests/SnippetChecks (generated from the README and DocC by
# scripts/extract-snippets.py) and Benchmarks/ (a package of its own).
set -euo pipefail
cd "$(dirname "$0")/.."

mapfile -t files < <(git ls-files '*.swift' | grep -v -e '^Tests/SnippetChecks/' -e '^Benchmarks/')
if [ "${1:-}" = "--check" ]; then
    swift format lint --strict --parallel "${files[@]}"
else
    swift format format --in-place --parallel "${files[@]}"
fi
