//! cel-go's parser limits, checked before an expression reaches the `cel` crate's parser:
//! kube-apiserver compiles every CEL expression of a webhook or policy with cel-go's defaults
//! (`NewParser` in cel-go's `parser/parser.go`; `staging/src/k8s.io/apiserver/pkg/cel/environment/base.go`
//! sets no parser option), so an expression over them is refused at create, with these words.
//!
//! - `ExpressionSizeCodePointLimit`, 100,000 code points of the source, checked before it is
//!   read: `expression code point size exceeds limit: size: N, limit 100000`.
//! - `MaxRecursionDepth`, 250, enforced twice: by the parse listener, per grammar rule, on
//!   nesting (parentheses, lists, maps, call arguments, an index, a ternary's else branch):
//!   `expression recursion limit exceeded: 250`; and by the tree visitor on the chain of
//!   ternaries, relations, arithmetic, selects, member calls and indexes from the root to any
//!   leaf (`checkAndIncrementRecursionDepth`): `max recursion depth exceeded`. `&&` and `||`
//!   are built balanced and `!`, `-` are flat: neither counts.
//!
//! Both are reported at no location (`ERROR: <input>:-1:0: ...`, `common/error.go`).
//!
//! Why here: the `cel` crate's parser and everything after it (macro expansion, the checks,
//! the cost walk, evaluation, even dropping the tree) recurse over the expression. `1+1+…`
//! with 6,000 terms (12 KB) overflowed a 2 MiB thread's stack and aborted the process; cel-go
//! refuses it at 252 terms. The scan below reads tokens in a loop and recurses only on nesting,
//! which it stops at the listener's limit, so it is itself bounded in stack, time (linear) and
//! memory (none held).

/// cel-go's `ExpressionSizeCodePointLimit` default.
pub const EXPRESSION_SIZE_CODE_POINT_LIMIT: usize = 100_000;

/// cel-go's `MaxRecursionDepth` default.
pub const MAX_RECURSION_DEPTH: u32 = 250;

/// The most tokens (literals, names, operators, brackets) an expression may have: the
/// proxy's own limit, not cel-go's. The `cel` crate's parser holds about 2.3 KB per token
/// while it parses (measured: a list literal of 12,490 elements, 25,000 tokens, takes the
/// process from 35 to 92 MB), so the largest expression cel-go's size limit lets through
/// (about 50,000 elements, 100,000 tokens) would need some 230 MB at once, more than a
/// sidecar has. 10,000 tokens is 23 MB, and ten times the longest expression in common
/// policies.
pub const MAX_TOKENS: u32 = 10_000;

/// An expression over one of cel-go's parser limits; displays as cel-go's
/// `Issues.String()` does (`ERROR: <input>:-1:0: ...`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LimitError {
    /// Longer than [`EXPRESSION_SIZE_CODE_POINT_LIMIT`] code points.
    #[error("ERROR: <input>:-1:0: expression code point size exceeds limit: size: {size}, limit {limit}")]
    Size {
        /// The expression's code points.
        size: usize,
        /// [`EXPRESSION_SIZE_CODE_POINT_LIMIT`].
        limit: usize,
    },
    /// Nested deeper than [`MAX_RECURSION_DEPTH`] (the parse listener's check).
    #[error("ERROR: <input>:-1:0: expression recursion limit exceeded: {0}")]
    Nesting(u32),
    /// A chain deeper than [`MAX_RECURSION_DEPTH`] (the visitor's check).
    #[error("ERROR: <input>:-1:0: max recursion depth exceeded")]
    Depth,
    /// More than [`MAX_TOKENS`] tokens: the proxy's limit.
    #[error("ERROR: <input>:-1:0: expression has more than {0} tokens, more than admission-proxy compiles (its own limit; kube-apiserver's is the size in code points)")]
    Tokens(u32),
}

/// Checks `source` against cel-go's parser limits.
///
/// Only the limits are judged: an expression that does not scan (a syntax error, a character
/// CEL does not have) passes, and the parser reports it, unless it is long enough to nest
/// deeper than the limit; the scan stops at the first limit it finds, so it is bounded
/// either way.
///
/// ```
/// use admission_proxy::matching::cel_limits::{check, LimitError};
///
/// assert_eq!(check("object.metadata.name == 'a' && 1 + 2 < 4"), Ok(()));
/// let chain = |terms: usize| vec!["1"; terms].join("+");
/// assert_eq!(check(&chain(251)), Ok(()));
/// assert_eq!(check(&chain(252)), Err(LimitError::Depth));
/// let nested = format!("{}1{}", "(".repeat(251), ")".repeat(251));
/// assert_eq!(check(&nested), Err(LimitError::Nesting(250)));
/// assert!(matches!(check(&"1".repeat(100_001)), Err(LimitError::Size { size: 100_001, .. })));
/// ```
///
/// # Errors
/// The first limit the expression is over.
pub fn check(source: &str) -> Result<(), LimitError> {
    let size = source.chars().count();
    if size > EXPRESSION_SIZE_CODE_POINT_LIMIT {
        return Err(LimitError::Size {
            size,
            limit: EXPRESSION_SIZE_CODE_POINT_LIMIT,
        });
    }
    let mut scan = Scan {
        lexer: Lexer::new(source),
        token: Token::End,
        nesting: 0,
        tokens: 0,
    };
    scan.advance();
    match scan.expr().and_then(|_| scan.over_tokens()) {
        Ok(_) => Ok(()),
        Err(Stop::Limit(e)) => Err(e),
        Err(Stop::Unreadable) => rough_depth(source),
    }
}

/// For text the scan cannot read: refused with [`LimitError::Depth`] when its tokens could
/// nest deeper than [`MAX_RECURSION_DEPTH`] (every operator, select and index counted, and the
/// deepest bracket), else left to the parser. The `cel` crate's parser builds its tree before
/// it reports a syntax error, so a long chain with a typo in it would still overflow the
/// stack; such text is refused by cel-go as well, in other words.
fn rough_depth(source: &str) -> Result<(), LimitError> {
    let mut lexer = Lexer::new(source);
    let (mut chain, mut open, mut deepest, mut tokens) = (0u32, 0u32, 0u32, 0u32);
    loop {
        tokens += 1;
        if tokens > MAX_TOKENS {
            return Err(LimitError::Tokens(MAX_TOKENS));
        }
        match lexer.next() {
            Token::End => break,
            Token::Bad => lexer.at += 1,
            Token::Relation
            | Token::Product
            | Token::Sum
            | Token::Minus
            | Token::Dot
            | Token::Question => chain += 1,
            Token::Open(b) => {
                chain += u32::from(b == b'[');
                open += 1;
                deepest = deepest.max(open);
            }
            Token::Close(_) => open = open.saturating_sub(1),
            _ => {}
        }
    }
    if chain > MAX_RECURSION_DEPTH || deepest >= MAX_RECURSION_DEPTH {
        return Err(LimitError::Depth);
    }
    Ok(())
}

/// An error at `offset` (in characters) of `source`, as cel-go displays it
/// (`Error.ToDisplayString`, `common/error.go`): `ERROR: <input>:LINE:COLUMN: message`, then the
/// line (tabs as spaces) and a caret under the column, a `．` for each wide (multi-byte)
/// character before it and `＾` when the character at it is wide; no snippet for a line over
/// 16,384 bytes (`maxSnippetLength`).
pub(crate) fn display_at(source: &str, offset: usize, message: &str) -> String {
    let mut line = 1;
    let mut line_start = 0;
    for (i, c) in source.chars().take(offset).enumerate() {
        if c == '\n' {
            line += 1;
            line_start = i + 1;
        }
    }
    let column = offset - line_start;
    let mut out = format!("ERROR: <input>:{line}:{}: {message}", column + 1);
    let snippet = source.split('\n').nth(line - 1).unwrap_or_default();
    if snippet.len() <= 16_384 {
        let snippet = snippet.replace('\t', " ");
        out.push_str("\n | ");
        out.push_str(&snippet);
        out.push_str("\n | ");
        let mut chars = snippet.chars();
        for c in chars.by_ref().take(column) {
            out.push(if c.len_utf8() > 1 { '．' } else { '.' });
        }
        out.push(if chars.next().is_some_and(|c| c.len_utf8() > 1) {
            '＾'
        } else {
            '^'
        });
    }
    out
}

/// Why the scan stopped early.
enum Stop {
    Limit(LimitError),
    /// Not CEL as the scan reads it: the parser will say what is wrong.
    Unreadable,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Token {
    /// An identifier (`in` is [`Token::Relation`]).
    Ident,
    /// A number, string, bytes, `true`, `false`, `null`.
    Literal,
    /// `<`, `<=`, `>=`, `>`, `==`, `!=`, `in`.
    Relation,
    /// `*`, `/`, `%`.
    Product,
    /// `+`.
    Sum,
    /// `-`: binary, or unary before an operand.
    Minus,
    Not,
    And,
    Or,
    Question,
    Colon,
    Dot,
    Comma,
    Open(u8),
    Close(u8),
    End,
    Bad,
}

struct Lexer<'a> {
    source: &'a [u8],
    at: usize,
    /// Whether the last token ends an operand: a `.` then a digit is a select, not a number.
    after_operand: bool,
}

impl<'a> Lexer<'a> {
    fn new(source: &'a str) -> Self {
        Lexer {
            source: source.as_bytes(),
            at: 0,
            after_operand: false,
        }
    }

    fn peek(&self, ahead: usize) -> u8 {
        self.source.get(self.at + ahead).copied().unwrap_or(0)
    }

    fn next(&mut self) -> Token {
        let token = self.read();
        self.after_operand = matches!(token, Token::Ident | Token::Literal | Token::Close(_));
        token
    }

    fn read(&mut self) -> Token {
        loop {
            match self.peek(0) {
                b' ' | b'\t' | b'\r' | b'\n' | 0x0c => self.at += 1,
                b'/' if self.peek(1) == b'/' => {
                    while !matches!(self.peek(0), b'\n' | 0) {
                        self.at += 1;
                    }
                }
                _ => break,
            }
        }
        if self.at >= self.source.len() {
            return Token::End;
        }
        let c = self.peek(0);
        let two = [c, self.peek(1)];
        let (token, width) = match &two {
            b"==" | b"!=" | b"<=" | b">=" => (Token::Relation, 2),
            b"&&" => (Token::And, 2),
            b"||" => (Token::Or, 2),
            [b'<' | b'>', _] => (Token::Relation, 1),
            [b'*' | b'/' | b'%', _] => (Token::Product, 1),
            [b'+', _] => (Token::Sum, 1),
            [b'-', _] => (Token::Minus, 1),
            [b'!', _] => (Token::Not, 1),
            [b'?', _] => (Token::Question, 1),
            [b':', _] => (Token::Colon, 1),
            [b',', _] => (Token::Comma, 1),
            [b'(' | b'[' | b'{', _] => (Token::Open(c), 1),
            [b')' | b']' | b'}', _] => (Token::Close(c), 1),
            [b'.', d] if d.is_ascii_digit() && !self.after_operand => return self.number(),
            [b'.', _] => (Token::Dot, 1),
            [b'0'..=b'9', _] => return self.number(),
            [b'`', _] => return self.escaped_ident(),
            [b'"' | b'\'', _] => return self.string(false),
            [b'_' | b'a'..=b'z' | b'A'..=b'Z', _] => return self.word(),
            _ => (Token::Bad, 0),
        };
        self.at += width;
        token
    }

    /// A number at the cursor: digits, hex digits, a `.` before a digit, an exponent's sign,
    /// a `u` suffix. The parser judges the literal; the scan only needs its end.
    fn number(&mut self) -> Token {
        if self.peek(0) == b'0' && matches!(self.peek(1), b'x' | b'X') {
            self.at += 2;
        }
        loop {
            match self.peek(0) {
                b'0'..=b'9' | b'a'..=b'f' | b'A'..=b'F' | b'u' | b'U' => self.at += 1,
                b'.' if self.peek(1).is_ascii_digit() => self.at += 1,
                b'+' | b'-' if self.exponent_sign() => self.at += 1,
                _ => return Token::Literal,
            }
        }
    }

    /// Whether the `+` or `-` at the cursor is an exponent's sign (`1e-3`).
    fn exponent_sign(&self) -> bool {
        self.at > 0
            && matches!(self.source[self.at - 1], b'e' | b'E')
            && self.peek(1).is_ascii_digit()
    }

    fn escaped_ident(&mut self) -> Token {
        self.at += 1;
        while !matches!(self.peek(0), b'`' | 0) {
            self.at += 1;
        }
        if self.peek(0) == 0 {
            return Token::Bad;
        }
        self.at += 1;
        Token::Ident
    }

    fn word(&mut self) -> Token {
        let start = self.at;
        while matches!(self.peek(0), b'_' | b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9') {
            self.at += 1;
        }
        let word = &self.source[start..self.at];
        // String and bytes prefixes: r, b and both, either case.
        let prefix = word.len() <= 2
            && word.iter().all(|b| matches!(b, b'r' | b'R' | b'b' | b'B'))
            && matches!(self.peek(0), b'"' | b'\'');
        if prefix {
            let raw = word.iter().any(|b| matches!(b, b'r' | b'R'));
            return self.string(raw);
        }
        match word {
            b"in" => Token::Relation,
            b"true" | b"false" | b"null" => Token::Literal,
            _ => Token::Ident,
        }
    }

    /// A quoted literal at the cursor (`'`, `"`, or either tripled); escapes skip the next
    /// byte unless `raw`.
    fn string(&mut self, raw: bool) -> Token {
        let quote = self.peek(0);
        let triple = self.peek(1) == quote && self.peek(2) == quote;
        self.at += if triple { 3 } else { 1 };
        loop {
            match self.peek(0) {
                0 if self.at >= self.source.len() => return Token::Bad,
                b'\\' if !raw => self.at += 2,
                b'\n' | b'\r' if !triple => return Token::Bad,
                q if q == quote
                    && (!triple || (self.peek(1) == quote && self.peek(2) == quote)) =>
                {
                    self.at += if triple { 3 } else { 1 };
                    return Token::Literal;
                }
                _ => self.at += 1,
            }
        }
    }
}

/// A recursive-descent reading of CEL's grammar (cel-go's `parser/gen/CEL.g4`) that keeps
/// only the depths cel-go's two checks measure. It recurses only where the grammar nests an
/// `expr`, and stops at [`MAX_RECURSION_DEPTH`] such levels, as cel-go's listener does.
struct Scan<'a> {
    lexer: Lexer<'a>,
    token: Token,
    /// `expr` rules open (the listener's count for that rule, the deepest of any rule).
    nesting: u32,
    /// Tokens read so far.
    tokens: u32,
}

type Depth = Result<u32, Stop>;

impl Scan<'_> {
    /// The next token; [`Scan::over_tokens`] once there are more than [`MAX_TOKENS`].
    fn advance(&mut self) {
        self.token = self.lexer.next();
        self.tokens += 1;
    }

    fn over_tokens(&self) -> Result<(), Stop> {
        if self.tokens > MAX_TOKENS {
            return Err(Stop::Limit(LimitError::Tokens(MAX_TOKENS)));
        }
        Ok(())
    }

    fn expect(&mut self, token: Token) -> Result<(), Stop> {
        if self.token != token {
            return Err(Stop::Unreadable);
        }
        self.advance();
        Ok(())
    }

    /// A chain node the visitor counts, over children of depth `depth`.
    fn counted(depth: u32) -> Depth {
        let depth = depth + 1;
        if depth > MAX_RECURSION_DEPTH {
            return Err(Stop::Limit(LimitError::Depth));
        }
        Ok(depth)
    }

    /// `expr: conditionalOr ('?' conditionalOr ':' expr)?`
    fn expr(&mut self) -> Depth {
        self.over_tokens()?;
        self.nesting += 1;
        if self.nesting > MAX_RECURSION_DEPTH {
            return Err(Stop::Limit(LimitError::Nesting(MAX_RECURSION_DEPTH)));
        }
        let mut depth = self.or()?;
        if self.token == Token::Question {
            self.advance();
            let then = self.or()?;
            self.expect(Token::Colon)?;
            let otherwise = self.expr()?;
            depth = Self::counted(depth.max(then).max(otherwise))?;
        }
        self.nesting -= 1;
        Ok(depth)
    }

    /// `||` and `&&` chains: built balanced, not counted.
    fn or(&mut self) -> Depth {
        let mut depth = self.and()?;
        while self.token == Token::Or {
            self.over_tokens()?;
            self.advance();
            depth = depth.max(self.and()?);
        }
        Ok(depth)
    }

    fn and(&mut self) -> Depth {
        let mut depth = self.relation()?;
        while self.token == Token::And {
            self.over_tokens()?;
            self.advance();
            depth = depth.max(self.relation()?);
        }
        Ok(depth)
    }

    /// Left-associative: each operator nests the chain so far one deeper.
    fn relation(&mut self) -> Depth {
        let mut depth = self.sum()?;
        while self.token == Token::Relation {
            self.advance();
            depth = Self::counted(depth.max(self.sum()?))?;
        }
        Ok(depth)
    }

    fn sum(&mut self) -> Depth {
        let mut depth = self.product()?;
        while matches!(self.token, Token::Sum | Token::Minus) {
            self.advance();
            depth = Self::counted(depth.max(self.product()?))?;
        }
        Ok(depth)
    }

    fn product(&mut self) -> Depth {
        let mut depth = self.unary()?;
        while self.token == Token::Product {
            self.advance();
            depth = Self::counted(depth.max(self.unary()?))?;
        }
        Ok(depth)
    }

    /// `'!'+ member` and `'-'+ member`: flat.
    fn unary(&mut self) -> Depth {
        while matches!(self.token, Token::Not | Token::Minus) {
            self.advance();
        }
        self.member()
    }

    /// `member: primary | member '.' '?'? ident ('(' args ')')? | member '[' '?'? expr ']'`:
    /// every select, member call and index is counted.
    fn member(&mut self) -> Depth {
        let mut depth = self.primary()?;
        loop {
            match self.token {
                Token::Dot => {
                    self.advance();
                    if self.token == Token::Question {
                        self.advance();
                    }
                    self.expect(Token::Ident)?;
                    match self.token {
                        Token::Open(b'(') => depth = depth.max(self.list(b')')?),
                        // `a.b.C{...}`: a message with a qualified name (its dots counted as
                        // selects: a few too many, never too few).
                        Token::Open(b'{') => depth = depth.max(self.entries()?),
                        _ => {}
                    }
                    depth = Self::counted(depth)?;
                }
                Token::Open(b'[') => {
                    self.advance();
                    if self.token == Token::Question {
                        self.advance();
                    }
                    let index = self.expr()?;
                    self.expect(Token::Close(b']'))?;
                    depth = Self::counted(depth.max(index))?;
                }
                _ => return Ok(depth),
            }
        }
    }

    /// Literals, identifiers, global calls, `(expr)`, lists, maps and messages: none counted.
    fn primary(&mut self) -> Depth {
        match self.token {
            Token::Literal => {
                self.advance();
                Ok(0)
            }
            Token::Dot | Token::Ident => {
                if self.token == Token::Dot {
                    self.advance();
                }
                self.expect(Token::Ident)?;
                match self.token {
                    Token::Open(b'(') => self.list(b')'),
                    Token::Open(b'{') => self.entries(),
                    _ => Ok(0),
                }
            }
            Token::Open(b'(') => {
                self.advance();
                let depth = self.expr()?;
                self.expect(Token::Close(b')'))?;
                Ok(depth)
            }
            Token::Open(b'[') => self.list(b']'),
            Token::Open(b'{') => self.entries(),
            _ => Err(Stop::Unreadable),
        }
    }

    /// `(` or `[` at the cursor, then `'?'? expr` separated by commas (a trailing one
    /// allowed), then `close`: the deepest element.
    fn list(&mut self, close: u8) -> Depth {
        self.advance();
        let mut depth = 0;
        while self.token != Token::Close(close) {
            if self.token == Token::Question {
                self.advance();
            }
            depth = depth.max(self.expr()?);
            if self.token != Token::Comma {
                break;
            }
            self.advance();
        }
        self.expect(Token::Close(close))?;
        Ok(depth)
    }

    /// `{` at the cursor, then `'?'? key ':' expr` entries (a map's key is an `expr`, a
    /// message's a field name: read as an `expr` too, which it is as deep as), then `}`.
    fn entries(&mut self) -> Depth {
        self.advance();
        let mut depth = 0;
        while self.token != Token::Close(b'}') {
            if self.token == Token::Question {
                self.advance();
            }
            depth = depth.max(self.expr()?);
            self.expect(Token::Colon)?;
            depth = depth.max(self.expr()?);
            if self.token != Token::Comma {
                break;
            }
            self.advance();
        }
        self.expect(Token::Close(b'}'))?;
        Ok(depth)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// cel-go's `parser_test.go` cases for the limits (`MaxRecursionDepth(32)` there; the
    /// same shapes at the default 250 here): a chain of 250 operators passes, 251 do not;
    /// nesting of 250 passes the listener, 251 do not.
    #[test]
    fn chains_count_as_cel_go_s_visitor_counts_them() {
        let chain = |op: &str, n: usize| {
            let mut s = "a".to_string();
            for _ in 0..n {
                s.push_str(op);
                s.push('b');
            }
            s
        };
        for op in [
            "+", " - ", "*", " / ", "%", " < ", "<=", " == ", " != ", " in ",
        ] {
            assert_eq!(check(&chain(op, 250)), Ok(()), "{op}");
            assert_eq!(check(&chain(op, 251)), Err(LimitError::Depth), "{op}");
        }
        // Selects, member calls and indexes.
        let selects = format!("a{}", ".b".repeat(250));
        assert_eq!(check(&selects), Ok(()));
        assert_eq!(check(&format!("{selects}.c")), Err(LimitError::Depth));
        let calls = format!("a{}", ".f(1)".repeat(251));
        assert_eq!(check(&calls), Err(LimitError::Depth));
        let indexes = format!("a{}", "[0]".repeat(251));
        assert_eq!(check(&indexes), Err(LimitError::Depth));
        // `&&`, `||`, `!` and `-` do not count.
        assert_eq!(check(&chain(" && ", 4_000)), Ok(()));
        assert_eq!(check(&chain(" || ", 4_000)), Ok(()));
        assert_eq!(check(&format!("{}a", "!".repeat(5_000))), Ok(()));
        assert_eq!(check(&format!("{}1", "-".repeat(5_000))), Ok(()));
        // Mixed: `a + b * c` is two deep; the deepest path counts, not the sum of siblings.
        let sum_of_products = vec!["b * c"; 200].join(" + ");
        assert_eq!(check(&sum_of_products), Ok(()));
    }

    #[test]
    fn nesting_counts_as_cel_go_s_listener_counts_it() {
        let nested =
            |open: &str, close: &str, n: usize| format!("{}1{}", open.repeat(n), close.repeat(n));
        for (open, close) in [("(", ")"), ("[", "]"), ("f(", ")"), ("{1: ", "}")] {
            assert_eq!(check(&nested(open, close, 249)), Ok(()), "{open}");
            assert_eq!(
                check(&nested(open, close, 250)),
                Err(LimitError::Nesting(250)),
                "{open}"
            );
        }
        // Ternaries nest to the right.
        let ternaries = format!("{}c", "a ? b : ".repeat(300));
        assert!(check(&ternaries).is_err());
    }

    /// cel-go's display of an error, as kube-apiserver 1.32 printed it for `'a'.matches('a**')`
    /// and `matches('a(', '.*')`; a second line and wide characters.
    #[test]
    fn errors_display_as_cel_go_s() {
        assert_eq!(
            display_at("'a'.matches('a**')", 12, "invalid matches argument"),
            "ERROR: <input>:1:13: invalid matches argument\n | 'a'.matches('a**')\n | ............^"
        );
        assert_eq!(
            display_at("matches('a(', '.*')", 8, "invalid matches argument"),
            "ERROR: <input>:1:9: invalid matches argument\n | matches('a(', '.*')\n | ........^"
        );
        assert_eq!(
            display_at("true &&\n\t'é'.matches('(')", 13, "m"),
            "ERROR: <input>:2:6: m\n |  'é'.matches('(')\n | ..．..^"
        );
    }

    #[test]
    fn size_is_counted_in_code_points() {
        let at_limit = format!("'{}'", "é".repeat(EXPRESSION_SIZE_CODE_POINT_LIMIT - 2));
        assert_eq!(check(&at_limit), Ok(()));
        let over = format!("'{}'", "é".repeat(EXPRESSION_SIZE_CODE_POINT_LIMIT - 1));
        assert_eq!(
            check(&over).unwrap_err().to_string(),
            "ERROR: <input>:-1:0: expression code point size exceeds limit: size: 100001, limit 100000"
        );
        // A flat list of 49,999 elements is within both of cel-go's limits, but not the
        // proxy's own on tokens; 4,999 elements (about 10,000 tokens) are.
        let list = |n: usize| format!("[{}]", vec!["1"; n].join(","));
        assert_eq!(check(&list(49_999)), Err(LimitError::Tokens(MAX_TOKENS)));
        assert_eq!(check(&list(4_990)), Ok(()));
    }

    /// Literals and comments hide no operator from the scan, and hide none in it.
    #[test]
    fn literals_and_comments_are_read_whole() {
        for expression in [
            "'a + b' + \"c ( d\" + '''e\n[''' + r'\\' + b\"\\\"(\" == x",
            "1.5e-3 + 0x1F + 2u + .5 == y // a comment ((((\n&& z",
            "a.b.?c == d[?0] && {?'k': v}.k && `escaped.ident` == 1",
            "M{f: 1, g: [1, 2,]}.f == 1",
        ] {
            assert_eq!(check(expression), Ok(()), "{expression}");
        }
        // A chain inside a string is no chain.
        let quoted = format!("'{}'", "1+".repeat(1_000));
        assert_eq!(check(&quoted), Ok(()));
        // Unreadable text is the parser's to refuse, unless it could nest too deep for it.
        assert_eq!(check("a + # b"), Ok(()));
        assert_eq!(check("'unterminated"), Ok(()));
        let typo = format!("# {}", vec!["1"; 3_000].join("+"));
        assert_eq!(check(&typo), Err(LimitError::Depth));
    }
}
