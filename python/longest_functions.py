#!/usr/bin/env python3
"""Prints the longest C++ / CUDA function definitions under some paths.

    longest_functions.py [--most N] PATH...

Each row is `LINES  FILE:LINE  NAME`: the lines from the line of the
function's name to its closing brace, longest first. A PATH is a file or a
folder, searched for .cpp, .h, .cu and .cuh files.

It reads the sources as text (no compiler, no compile_commands.json: it
runs in a second over the whole tree, CUDA files included). Comments,
string, raw string and character literals (and digit separators) are passed
over; preprocessor lines are skipped, and each branch of an #if / #elif /
#else chain is read from the state before it (the scan goes on from the
end of the first), so braces that a branch opens and another closes still
balance. A `{`
opens a function body when it stands at namespace or class scope after a
parameter list: `name(...)`, then qualifiers, a trailing return type or a
constructor's initialisers. Lambdas, local classes and blocks count toward
the function that holds them; a brace initialiser (`= {`, `x{...}`,
`f({...})`) or an enum is no function, and a class's or a namespace's
member functions are found inside it. GoogleTest's `TEST(Suite, Name)`
counts as a function named so.
"""

import argparse
import os
import re
import signal
import sys

SUFFIXES = (".cpp", ".h", ".cu", ".cuh")

# Words that take a parenthesised argument in a declaration but do not name
# it: the name is the identifier before a later `(`.
NOT_A_NAME = {
    "__launch_bounds__", "__attribute__", "__declspec", "alignas",
    "decltype", "noexcept", "throw", "requires", "sizeof", "alignof",
    "static_assert",
}
# Heads with one of these at the top level open a scope whose members may be
# functions.
SCOPE_WORDS = {"namespace", "class", "struct", "union"}

WORD = re.compile(r"[A-Za-z_0-9]")


def comment_end(text, i):
    """The index after the comment starting at i (a `//` comment ends
    before its newline), or None when none starts there."""
    if text.startswith("//", i):
        end = text.find("\n", i)
        return len(text) if end < 0 else end
    if text.startswith("/*", i):
        end = text.find("*/", i + 2)
        return len(text) if end < 0 else end + 2
    return None


def tokens(text):
    """Yields (line, token) for the words and punctuation of C++ `text`; a
    string or character literal is one token "STR", and the preprocessor
    conditionals are "#if", "#else" (also #elif) and "#endif"."""
    i, n, line = 0, len(text), 1
    at_line_start = True
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
            at_line_start = True
            continue
        if c in " \t\r\f\v":
            i += 1
            continue
        end = comment_end(text, i)
        if end is not None:
            line += text.count("\n", i, end)
            i = end
            continue
        if at_line_start and c == "#":
            # A directive, with its continuation lines and comments.
            j = i
            directive = []
            while j < n and text[j] != "\n":
                end = comment_end(text, j)
                if end is not None:
                    line += text.count("\n", j, end)
                    j = end
                elif text.startswith("\\\n", j):
                    line += 1
                    j += 2
                else:
                    directive.append(text[j])
                    j += 1
            word = "".join(directive)[1:].split(None, 1)
            word = word[0] if word else ""
            if word.startswith("if"):
                yield line, "#if"
            elif word in ("elif", "else", "elifdef", "elifndef"):
                yield line, "#else"
            elif word == "endif":
                yield line, "#endif"
            i = j
            continue
        at_line_start = False
        if c == '"' or c == "'":
            end = skip_literal(text, i)
            yield line, "STR"
            line += text.count("\n", i, end)
            i = end
            continue
        if WORD.match(c):
            j = i
            while j < n and (WORD.match(text[j]) or
                             (text[j] == "'" and text[i].isdigit() and
                              j + 1 < n and WORD.match(text[j + 1]))):
                j += 1
            word = text[i:j]
            if j < n and text[j] == '"' and word in ("R", "u8R", "uR", "UR",
                                                     "LR"):
                # A raw string: R"delim( ... )delim".
                open_end = text.find("(", j)
                delim = text[j + 1:open_end]
                close = text.find(")" + delim + '"', open_end)
                end = n if close < 0 else close + len(delim) + 2
            elif j < n and text[j] in "\"'" and word in ("u8", "u", "U", "L"):
                end = skip_literal(text, j)  # u8"..", L'x' and so on
            else:
                yield line, word
                i = j
                continue
            yield line, "STR"
            line += text.count("\n", i, end)
            i = end
            continue
        if text.startswith("::", i) or text.startswith("->", i):
            yield line, text[i:i + 2]
            i += 2
            continue
        yield line, c
        i += 1


def skip_literal(text, i):
    """The index after the string or character literal starting at i."""
    quote = text[i]
    j = i + 1
    n = len(text)
    while j < n:
        if text[j] == "\\":
            j += 2
            continue
        if text[j] == "\n":
            return j  # unterminated: the line ends it
        if text[j] == quote:
            return j + 1
        j += 1
    return n


QUALIFIER_WORDS = {
    "const", "volatile", "noexcept", "override", "final", "throw", "requires",
    "mutable", "try", "__attribute__",
}


def closing(words, k):
    """The index of the `)` matching the `(` at k (len(words): none)."""
    depth = 0
    for m in range(k, len(words)):
        depth += words[m] == "("
        depth -= words[m] == ")"
        if depth == 0:
            return m
    return len(words)


def function_name(head):
    """The name and line of the function whose header is `head` (the
    (line, token) pairs before its body's `{`), or None when the brace
    opens no function body."""
    words = [t for _, t in head]
    paren = angle = 0
    call = None  # index of the `(` of the parameter list
    name_at = None  # index of the name's (last) token
    name = None
    k = 0
    while k < len(words):
        t = words[k]
        if paren == 0 and angle == 0 and t == "operator" and call is None:
            # operator(), operator==, operator<, operator bool...
            j = k + 1
            if words[j:j + 2] == ["(", ")"]:
                j += 2
            while j < len(words) and words[j] != "(":
                j += 1
            op = words[k + 1:j]
            name = "operator" + (" " if op and WORD.match(op[0][:1]) else "")
            name += " ".join(op) if op and WORD.match(op[0][:1]) else "".join(op)
            name_at, call, k = k, j, j
            continue
        if t == "(":
            if paren == 0 and angle == 0 and call is None:
                prev = words[k - 1] if k > 0 else ""
                if WORD.match(prev[:1]) and prev not in NOT_A_NAME:
                    call, name_at, name = k, k - 1, prev
            paren += 1
        elif t == ")":
            paren -= 1
            if paren == 0 and call is not None and k == closing(words, call):
                # A macro before the declaration (`MACRO(x) void f() {`):
                # a word that qualifies nothing starts the real one.
                nxt = words[k + 1] if k + 1 < len(words) else ""
                if WORD.match(nxt[:1]) and nxt not in QUALIFIER_WORDS and (
                        "(" in words[k + 1:]):
                    call = name_at = name = None
        elif paren == 0 and t == "<":
            angle += 1
        elif paren == 0 and t == ">" and angle > 0:
            angle -= 1
        elif paren == 0 and angle == 0 and call is None and (
                t == "=" or t in SCOPE_WORDS or t == "enum"):
            return None  # `T x = {`, `auto f = [] {`, a class, an enum
        k += 1
    if paren != 0 or call is None:
        return None  # `{` inside an argument list, or no parameter list
    # Qualifiers before the name: A::B<T>::name, ~X.
    parts = [name]
    j = name_at - 1
    while j >= 0:
        if words[j] == "~":
            parts.insert(0, "~")
            j -= 1
            continue
        if words[j] != "::":
            break
        parts.insert(0, "::")
        j -= 1
        if j >= 0 and words[j] == ">":
            depth, end = 0, j
            while j >= 0:
                if words[j] == ">":
                    depth += 1
                elif words[j] == "<":
                    depth -= 1
                    if depth == 0:
                        break
                j -= 1
            j -= 1
            if j < 0:
                break
            parts.insert(0, words[j] + "<" + "".join(words[j + 2:end]) + ">")
            j -= 1
            continue
        if j >= 0 and WORD.match(words[j][:1]):
            parts.insert(0, words[j])
            j -= 1
    qualified = "".join(parts)
    # A macro that defines a function (TEST, TEST_F): named with its
    # arguments.
    if re.fullmatch(r"[A-Z][A-Z0-9_]*", qualified):
        args = " ".join(words[call + 1:closing(words, call)])
        qualified = f"{qualified}({args.replace(' ,', ',')})"
    return qualified, head[name_at][0], call


def class_name(words):
    """The name a class head declares (None: unnamed or no class)."""
    keyword = max((k for k, w in enumerate(words)
                   if w in ("class", "struct", "union")), default=None)
    if keyword is None:
        return None
    name = None
    for w in words[keyword + 1:]:
        if w in (":", "<", "final"):
            break
        if WORD.match(w[:1]):
            name = w
    return name


def member_initializer(words, call):
    """Whether the `{` after `words` (a function head whose parameter list
    opens at `call`) starts a constructor's member initialiser, `b_{a}`,
    rather than the body."""
    close = closing(words, call)
    depth = 0
    colon = False
    for w in words[close + 1:]:
        depth += w == "("
        depth -= w == ")"
        colon = colon or (depth == 0 and w == ":")
    return colon and (WORD.match(words[-1][:1]) or words[-1] == ">")


def functions(path):
    """Yields (lines, line, name) for each function defined in `path`."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    # Scopes, as (kind, data): ("scope", class name or None) for a namespace
    # or a class (whose members may be functions), ("function", (name,
    # line)), ("init", head) for a member initialiser's braces and
    # ("opaque", None) for the rest.
    stack = []
    head = []
    # Each branch of an #if chain starts from the state before it; after
    # #endif the scan goes on from the end of the first branch.
    branches = []
    found = {}

    def at_scope():
        return all(kind == "scope" for kind, _ in stack)

    for line, t in tokens(text):
        if t == "#if":
            branches.append([(list(stack), list(head)), None])
            continue
        if t in ("#else", "#endif"):
            if not branches:
                continue
            frame = branches[-1]
            if frame[1] is None:
                frame[1] = (list(stack), list(head))
            if t == "#else":
                stack, head = list(frame[0][0]), list(frame[0][1])
            else:
                branches.pop()
                stack, head = list(frame[1][0]), list(frame[1][1])
            continue
        if t == "{":
            if not at_scope():
                stack.append(("opaque", None))
                continue
            words = [w for _, w in head]
            named = function_name(head)
            if named and member_initializer(words, named[2]):
                stack.append(("init", head))
            elif named:
                classes = [data for kind, data in stack if data]
                name = "::".join(classes + [named[0]])
                stack.append(("function", (name, named[1])))
            elif any(w in SCOPE_WORDS for w in words) or (
                    words == ["extern", "STR"]) or not words:
                stack.append(("scope", class_name(words)))
            else:
                stack.append(("opaque", None))
            head = []
            continue
        if t == "}":
            kind, data = stack.pop() if stack else ("scope", None)
            if kind == "function":
                name, start = data
                key = (start, name)
                found[key] = max(found.get(key, 0), line - start + 1)
            if kind == "init":
                head = data + [(line, "{}")]
            elif at_scope():
                head = []
            continue
        if not at_scope():
            continue
        if t == ";":
            head = []
            continue
        # Access specifiers end a head too (`public:`).
        if t == ":" and len(head) == 1 and head[0][1] in (
                "public", "private", "protected"):
            head = []
            continue
        head.append((line, t))
    for (line, name), lines in found.items():
        yield lines, line, name


def sources(paths):
    for root in paths:
        if os.path.isfile(root):
            yield root
            continue
        for folder, dirs, files in os.walk(root):
            dirs.sort()
            for name in sorted(files):
                if name.endswith(SUFFIXES):
                    yield os.path.join(folder, name)


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends it quietly
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0])
    parser.add_argument("--most", type=int, default=10,
                        help="how many functions to print (default 10)")
    parser.add_argument("paths", nargs="+")
    args = parser.parse_args()
    if args.most < 1:
        parser.error("--most takes a positive number")
    rows = []
    for path in sources(args.paths):
        for lines, line, name in functions(path):
            rows.append((-lines, path, line, name))
    rows.sort()
    for lines, path, line, name in rows[:args.most]:
        print(f"{-lines:5d}  {path}:{line}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
