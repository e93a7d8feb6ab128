#!/usr/bin/env python3
"""Fail on an unqualified name in a SQL text of cscp's C code (issue 39, finding 1).

Every statement cscp's C code runs is parsed under the caller's search_path, often a superuser's
or the extension owner's; spiplan.c's header states the rule this checks: operators written
OPERATOR(pg_catalog.x), functions pg_catalog.f or cscp.f, the types of casts pg_catalog.t (or a
keyword type: int, bigint, boolean, interval, ...), collations pg_catalog."C", and none of the
constructs that look up an operator by name on the search_path (IN (...), IS DISTINCT FROM,
NULLIF, LIKE, BETWEEN, CASE x WHEN).  A SQL text is a run of adjacent C string literals (with
macros between them) that starts like a statement, or holds a parameter ($1) or an
OPERATOR(pg_catalog.x).  Usage: spi-qualified.py [FILE.c ...] (default every .c and .h under src/); prints
each finding as file:line: problem, and exits 1 when there is one.
"""
import glob
import re
import sys

START = re.compile(r'^\s*\(?\s*(SELECT|INSERT|UPDATE|DELETE|WITH|VALUES)\b')
SQLISH = re.compile(r'\$\d|OPERATOR\(pg_catalog\.')
TOKEN = re.compile(r"""(OPERATOR\(pg_catalog\.[^)]+\))|('(?:[^']|'')*')|(\\"[^\\"]*\\")|(\$\d+)"""
                   r"""|([A-Za-z_][A-Za-z0-9_]*(?:\.(?:[A-Za-z_][A-Za-z0-9_]*|\\"[^\\"]*\\"|\*))*)"""
                   r"""|(::)|([+\-*/<>=~!@#%^&|`?]+)|(\s+)|(.)""")
# Words that may stand before "(" and are not function calls (keywords, aliases' column lists).
NOT_CALLS = {'in', 'any', 'all', 'some', 'exists', 'values', 'array', 'coalesce', 'greatest', 'least',
             'as', 'on', 'from', 'join', 'lateral', 'using', 'where', 'select', 'by', 'conflict',
             'materialized', 'is', 'returning', 'set', 'distinct', 'and', 'or', 'not', 'when', 'then',
             'else', 'case', 'row', 'cast', 'filter', 'over', 'into', 'with', 'recursive', 'union',
             'limit', 'only', 'default', 'operator', 'ordinality', 'grouping'}
# Type names that are keywords (the grammar makes them pg_catalog's) and need no qualification.
KEYWORD_TYPES = {'int', 'integer', 'bigint', 'smallint', 'boolean', 'numeric', 'decimal', 'real',
                 'float', 'interval', 'timestamp', 'time', 'char', 'character', 'varchar', 'bit', 'double'}
# Constructs that resolve an operator ("=", "~~", "<=") by name on the search_path.
BY_NAME = [(re.compile(r'\bIN\s*\(', re.I), 'IN (...) resolves "=" on the search_path: write OPERATOR(pg_catalog.=) ANY'),
           (re.compile(r'\bIS\s+(NOT\s+)?DISTINCT\s+FROM\b', re.I), 'IS DISTINCT FROM resolves "=" on the search_path'),
           (re.compile(r'\bNULLIF\s*\(', re.I), 'NULLIF resolves "=" on the search_path'),
           (re.compile(r'\b(I?LIKE|SIMILAR\s+TO)\b', re.I), 'LIKE resolves "~~" on the search_path'),
           (re.compile(r'\bBETWEEN\b', re.I), 'BETWEEN resolves "<=" and ">=" on the search_path'),
           (re.compile(r'\bCASE\s+(?!WHEN\b)[^\s]', re.I), 'CASE x WHEN resolves "=" on the search_path'),
           (re.compile(r'\bCOLLATE\s+(?!pg_catalog\.)', re.I), 'a collation resolved on the search_path'),
           (re.compile(r"'(?![a-z_]+\.)[^']*'::pg_catalog\.regconfig"), 'a text search configuration resolved on the search_path')]


def c_string_runs(text):
    """Runs of adjacent C string literals: [(line, [(start, end), ...])], contents' offsets."""
    i, n, out = 0, len(text), []
    while i < n:
        if text.startswith('/*', i):
            i = text.find('*/', i + 2) + 2
            continue
        if text.startswith('//', i) or text.startswith('#include', i):
            i = text.find('\n', i)
            continue
        c = text[i]
        if c == "'":
            j = i + 1
            while text[j] != "'":
                j += 2 if text[j] == '\\' else 1
            i = j + 1
            continue
        if c == '"':
            line, pieces = text.count('\n', 0, i) + 1, []
            while True:
                j = i + 1
                while text[j] != '"':
                    j += 2 if text[j] == '\\' else 1
                pieces.append((i + 1, j))
                i = j + 1
                m = re.match(r'(\s|\\\n|/\*.*?\*/)*"', text[i:], re.S)
                if not m:
                    m = re.match(r'(\s|\\\n)*[A-Za-z_][A-Za-z0-9_]*(\([^()"]*(\([^()"]*\))?[^()"]*\))?(\s|\\\n)*"', text[i:])
                if m:
                    i += m.end() - 1
                    continue
                break
            out.append((line, pieces))
            continue
        i += 1
    return out


def problems(sql):
    """What in sql resolves a name on the search_path."""
    found = []
    toks = [m.group(0) for m in TOKEN.finditer(sql)]
    sig = [t for t in toks if not t.isspace()]
    for k, t in enumerate(sig):
        prev = sig[k - 1] if k > 0 else ''
        prev2 = sig[k - 2] if k > 1 else ''
        nxt = sig[k + 1] if k + 1 < len(sig) else ''
        if re.fullmatch(r'[+\-*/<>=~!@#%^&|`?]+', t):
            if t == '*' and (prev in ('(', ',', 'SELECT', 'RETURNING', '') or prev.endswith('.')
                             or nxt in (')', ',', 'FROM', '')):
                continue            # SELECT *, count(*), RETURNING *
            if t == '%' and re.match(r'[sdu]', nxt):
                continue            # a printf conversion the caller fills in (%s: a relation's name)
            if t == '=' and re.fullmatch(r'[a-z_][a-z0-9_]*', prev) and prev2.upper() in ('SET', ','):
                continue            # an UPDATE's assignment
            found.append('operator %s unqualified: write OPERATOR(pg_catalog.%s)' % (t, t))
        elif re.fullmatch(r'[A-Za-z_][A-Za-z0-9_]*', t):
            if prev == '::' and t.lower() not in KEYWORD_TYPES:
                found.append('type %s unqualified: write ::pg_catalog.%s' % (t, t))
            elif (nxt == '(' and t.lower() not in NOT_CALLS
                  and prev.upper() not in ('AS', 'RECURSIVE', 'ORDINALITY', 'WITH')):
                found.append('function %s unqualified: write pg_catalog.%s' % (t, t))
    for n, (rx, why) in enumerate(BY_NAME):
        if rx.search(sql if n == len(BY_NAME) - 1 else re.sub(r"'(?:[^']|'')*'", "''", sql)):
            found.append(why)
    return found


def main(files):
    bad = 0
    for f in files:
        text = open(f).read()
        for line, pieces in c_string_runs(text):
            sql = ' '.join(text[a:b] for a, b in pieces)
            if not (START.match(sql) or SQLISH.search(sql)):
                continue
            for p in dict.fromkeys(problems(sql)):
                print('%s:%d: %s' % (f, line, p))
                bad += 1
    if bad:
        print('%d unqualified name(s) in SQL texts; see the rule in src/shared/spiplan.c' % bad)
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:] or sorted(glob.glob('src/**/*.[ch]', recursive=True))))
