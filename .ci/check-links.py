#!/usr/bin/env python3
"""Every link and anchor the documentation, the code and the alerts cite resolves.

- In every tracked Markdown file but the vendored ones: each relative link `[..](path#anchor)`
  names a file that exists, and its anchor a heading of that file (GitHub's anchors:
  lower-case, punctuation dropped, spaces as `-`, repeats numbered).
- In every tracked source, script, manifest and Markdown file: each `docs/X.md#anchor`,
  `README.md#anchor` (including `runbook_url`s' `blob/main/...#anchor`) and each citation
  `docs/X.md, "Heading"` (or `README, "Heading"`) names a file that exists and a heading it has.
- Each citation of benches/README.md by heading: `benches/README.md, "Heading"`,
  `benches/README.md ("Heading")`, `benches/README.md: "Heading"` or `benches/README.md "Heading"`
  (single quotes too; the quote may open the next line, after a comment's `#` or `//`): the quoted
  text, up to its closing quote or the end of its line, is the start of one of its headings
  (compared as anchors, so case and punctuation aside).

Exits 1 listing what does not resolve.
"""
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def anchor(text):
    t = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return t.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        seen, out = {}, set()
        fenced = False
        for line in path.read_text().split("\n"):
            if line.startswith("```"):
                fenced = not fenced
            m = None if fenced else re.match(r"^#+ (.*)$", line)
            if m:
                a = anchor(re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", m.group(1)))
                n = seen.get(a, 0)
                seen[a] = n + 1
                out.add(a if n == 0 else f"{a}-{n}")
        cache[path] = out
    return cache[path]


# `benches/README.md` followed by `,` `:` or a space, then maybe a line break (and a comment
# marker), maybe `(`, then a quoted heading.
BENCH_CITE = re.compile(r"benches/README\.md(?:[,:]|(?=[ \t\n]))[ \t]*(?:\n[ \t]*(?:#+|//+!?)?[ \t]*)?"
                        r"\(?(?:\"([^\"\n]+)|'([^'\n]+)')")


def main():
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    tracked = [f for f in tracked if not f.startswith("vendor/") and f != ".ci/check-links.py"
               and (ROOT / f).is_file()]
    problems = []
    for f in tracked:
        path = ROOT / f
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        if f.endswith(".md") and not f.startswith("tests/fixtures/public-webhooks/"):
            for m in re.finditer(r"\[[^\]]*\]\(([^)\s]+)\)", text):
                target = m.group(1)
                if re.match(r"^[a-z]+:", target) or target.startswith("/"):
                    continue
                file_part, _, frag = target.partition("#")
                dest = (path.parent / file_part).resolve() if file_part else path
                if not dest.exists():
                    problems.append(f"{f}: link to {target}: no such file")
                elif frag and dest.suffix == ".md" and frag not in anchors(dest):
                    problems.append(f"{f}: link to {target}: no such heading")
        for m in re.finditer(r"(?:blob/main/)?((?:docs/[\w/.-]+|benches/README|README)\.md)#([\w-]+)", text):
            dest = ROOT / m.group(1)
            if not dest.exists():
                problems.append(f"{f}: {m.group(0)}: no such file")
            elif m.group(2) not in anchors(dest):
                problems.append(f"{f}: {m.group(0)}: no such heading")
        for m in re.finditer(r'((?:docs/[\w/.-]+)\.md|README),? "([^"\n]+)', text):
            name = m.group(1) if m.group(1).endswith(".md") else "README.md"
            dest = ROOT / name
            if not dest.exists():
                problems.append(f"{f}: {m.group(0)}: no such file")
                continue
            cited = anchor(m.group(2))
            if not any(a.startswith(cited) for a in anchors(dest)):
                problems.append(f"{f}: {m.group(0)}: no such heading in {name}")
        bench = ROOT / "benches/README.md"
        for m in BENCH_CITE.finditer(text):
            cited = anchor(m.group(1) or m.group(2))
            if not bench.exists():
                problems.append(f"{f}: {m.group(0)!r}: no such file")
            elif not cited or not any(a.startswith(cited) for a in anchors(bench)):
                problems.append(f"{f}: {m.group(0)!r}: no such heading in benches/README.md")
    for p in problems:
        print("FAIL", p)
    print(f"links: {len(problems)} failing")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
