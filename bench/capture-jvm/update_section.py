#!/usr/bin/env python3
"""Replaces (or appends) one '## TITLE' section of a Markdown file with the given body, leaving
every other section, e.g. another benchmark's, as it was."""
import sys


def main() -> int:
    path, title, body_path = sys.argv[1:4]
    heading = f"## {title}"
    with open(body_path, encoding="utf-8") as f:
        body = f.read().strip() + "\n"
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines(keepends=True)
    except FileNotFoundError:
        lines = ["# Benchmarks\n"]
    start = next((i for i, line in enumerate(lines) if line.rstrip() == heading), None)
    section = [heading + "\n", "\n", body]
    if start is None:
        if lines and lines[-1].strip():
            lines.append("\n")
        lines += section
    else:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        tail = lines[end:]
        lines = lines[:start] + section + (["\n"] if tail else []) + tail
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
