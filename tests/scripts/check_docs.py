#!/usr/bin/env python3
"""Checks README.md and docs/*.md: the README's size, every relative link and
its #anchor, and no internal tracker references or development narration.

Usage: check_docs.py [REPO_ROOT]   (default: two folders above this script)
Exit 0 when every check passes, 1 with one line per problem otherwise.
"""

import os
import re
import sys

README_LIMIT_BYTES = 15000

# Internal tracker numbers and the words of a development diary mean nothing to
# a reader of the documentation; they belong in commit messages, if anywhere.
BANNED_PATTERNS = [
    (re.compile(r"\bissues? ?#?\d+", re.IGNORECASE), "internal issue number"),
    (re.compile(r"\bsessions?\b", re.IGNORECASE), "development-history word 'session'"),
    (re.compile(r"\blent\b", re.IGNORECASE), "development-history word 'lent'"),
    (re.compile(r"\bhelpers?\b", re.IGNORECASE), "development-history word 'helper'"),
    (re.compile(r"\bcontract \d+", re.IGNORECASE), "internal contract number"),
    (re.compile(r"\bexperiment \d+ of\b", re.IGNORECASE), "internal experiment numbering"),
]

# [text](target) and ![alt](target); a target ends at whitespace or ')'.
LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
# Reference-style definitions: [label]: target
REFERENCE_DEFINITION = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s{0,3}(```|~~~)")


def strip_code_blocks(lines):
    """The lines outside fenced code blocks, with their 1-based numbers."""
    inside = False
    for number, line in enumerate(lines, 1):
        if FENCE.match(line):
            inside = not inside
            continue
        if not inside:
            yield number, line


def without_inline_code(line):
    return re.sub(r"`[^`]*`", "", line)


def github_slug(heading_text):
    """GitHub's anchor for a heading: markup removed, lower-case, punctuation
    other than '-' and '_' dropped, each space a '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading_text)  # links keep their text
    text = re.sub(r"<[^>]+>", "", text)                              # inline HTML tags
    text = text.replace("`", "").replace("*", "")
    text = text.lower()
    text = "".join(ch for ch in text if ch.isalnum() or ch in " -_")
    return text.replace(" ", "-")


def heading_anchors(path):
    """Every anchor GitHub makes for the headings of a Markdown file,
    duplicates numbered -1, -2, ... in order of appearance."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    anchors, seen = set(), {}
    for _, line in strip_code_blocks(lines):
        match = HEADING.match(line)
        if not match:
            continue
        slug = github_slug(match.group(2))
        if slug in seen:
            seen[slug] += 1
            slug = f"{slug}-{seen[slug]}"
        else:
            seen[slug] = 0
        anchors.add(slug)
    return anchors


def link_targets(lines):
    for number, line in strip_code_blocks(lines):
        definition = REFERENCE_DEFINITION.match(line)
        if definition:
            yield number, definition.group(1)
            continue
        for match in LINK.finditer(without_inline_code(line)):
            yield number, match.group(1)


def is_external(target):
    return re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) is not None  # http:, https:, mailto:, ...


def check_links(path, lines, anchors_of):
    problems = []
    for number, target in link_targets(lines):
        if is_external(target):
            continue
        file_part, _, anchor = target.partition("#")
        resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
        where = f"{path}:{number}: link '{target}'"
        if not os.path.exists(resolved):
            problems.append(f"{where}: {resolved} does not exist")
            continue
        if anchor:
            if not resolved.endswith(".md"):
                problems.append(f"{where}: an anchor into a file that is not Markdown")
            elif anchor not in anchors_of(resolved):
                problems.append(f"{where}: no heading with anchor '#{anchor}' in {resolved}")
    return problems


def check_banned(path, lines):
    problems = []
    for number, line in enumerate(lines, 1):
        for pattern, what in BANNED_PATTERNS:
            match = pattern.search(line)
            if match:
                problems.append(f"{path}:{number}: {what}: '{match.group(0)}'")
    return problems


def documentation_files(root):
    files = [os.path.join(root, "README.md")]
    docs = os.path.join(root, "docs")
    if os.path.isdir(docs):
        files += sorted(os.path.join(docs, name) for name in os.listdir(docs) if name.endswith(".md"))
    return files


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", ".."))
    problems = []
    readme = os.path.join(root, "README.md")
    if not os.path.isfile(readme):
        print(f"check_docs: {readme} is missing")
        return 1
    size = os.path.getsize(readme)
    if size > README_LIMIT_BYTES:
        problems.append(f"{readme}: {size} bytes, over the limit of {README_LIMIT_BYTES}")

    anchor_cache = {}

    def anchors_of(target):
        if target not in anchor_cache:
            anchor_cache[target] = heading_anchors(target)
        return anchor_cache[target]

    files = documentation_files(root)
    for path in files:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
        problems += check_links(path, lines, anchors_of)
        problems += check_banned(path, lines)

    for problem in problems:
        print(problem)
    print(f"check_docs: {len(files)} files, README {size} bytes, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
