//! A small, quote-aware shell tokenizer.
//!
//! It is not a full shell grammar: it only needs to know where words, operators, redirections,
//! comments and here-documents are, what each word means once quotes and escapes are resolved,
//! and which nested command texts (`$(...)`, backticks, `<(...)`, unquoted here-doc bodies) the
//! shell would run. Those nested texts are returned as payloads and analysed recursively by the
//! caller, so this module itself never recurses and runs in linear time.

#[derive(Debug, Clone, Default)]
pub(crate) struct Word {
    /// The word as written (quotes and escapes kept).
    pub raw: String,
    /// The word after quote removal and escape processing; expansions stay verbatim.
    pub value: String,
    /// Char offsets of the word in the tokenized text.
    pub start: usize,
    pub end: usize,
    /// Byte offset into `value` of the first unquoted glob/brace character, if any.
    pub glob_at: Option<usize>,
    /// Quotes or substitutions were left open at the end of the input.
    pub unterminated: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Semi,
    Background,
    AndIf,
    OrIf,
    Pipe,
    Newline,
    Open,
    Close,
}

#[derive(Debug, Clone)]
pub(crate) struct Redirect {
    pub op: String,
    pub target: Option<Word>,
    pub heredoc_body: Option<String>,
    /// Char offsets of the here-doc body in the tokenized text.
    pub heredoc_span: Option<(usize, usize)>,
}

impl Redirect {
    /// Whether the redirection writes to a file (`2>&1` duplicates a descriptor instead).
    pub fn writes(&self) -> bool {
        let duplicates_fd = self.op == ">&"
            && self
                .target
                .as_ref()
                .is_some_and(|t| t.value.chars().all(|c| c.is_ascii_digit() || c == '-'));
        self.op.contains('>') && !duplicates_fd
    }

    pub fn is_heredoc_like(&self) -> bool {
        self.op.starts_with("<<")
    }
}

#[derive(Debug, Clone)]
pub(crate) enum Token {
    Word(Word),
    Op(Op),
    Redirect(Redirect),
}

#[derive(Debug, Default)]
pub(crate) struct Lexed {
    pub tokens: Vec<Token>,
    /// Command texts the shell would execute while expanding this text.
    pub payloads: Vec<String>,
    pub unterminated: bool,
}

struct PendingHeredoc {
    token_index: usize,
    delimiter: String,
    strip_tabs: bool,
    expands: bool,
}

pub(crate) fn tokenize(text: &str) -> Lexed {
    let chars: Vec<char> = text.chars().collect();
    let mut lexer = Lexer {
        chars: &chars,
        pos: 0,
        out: Lexed::default(),
        pending: Vec::new(),
    };
    lexer.run();
    collect_subscript_payloads(&chars, &mut lexer.out.payloads);
    lexer.out
}

fn is_blank(c: char) -> bool {
    c == ' ' || c == '\t' || c == '\r'
}

fn ends_word(c: char) -> bool {
    is_blank(c) || matches!(c, '\n' | ';' | '&' | '|' | '(' | ')' | '<' | '>')
}

struct Lexer<'a> {
    chars: &'a [char],
    pos: usize,
    out: Lexed,
    pending: Vec<PendingHeredoc>,
}

impl Lexer<'_> {
    fn peek(&self, offset: usize) -> Option<char> {
        self.chars.get(self.pos + offset).copied()
    }

    fn slice(&self, from: usize, to: usize) -> String {
        let to = to.min(self.chars.len());
        let from = from.min(to);
        self.chars[from..to].iter().collect()
    }

    fn run(&mut self) {
        while let Some(c) = self.peek(0) {
            match c {
                c if is_blank(c) => self.pos += 1,
                '\n' => {
                    self.pos += 1;
                    self.out.tokens.push(Token::Op(Op::Newline));
                    self.read_heredoc_bodies();
                }
                '#' => {
                    while self.peek(0).is_some_and(|c| c != '\n') {
                        self.pos += 1;
                    }
                }
                ';' => {
                    self.pos += if self.peek(1) == Some(';') { 2 } else { 1 };
                    self.out.tokens.push(Token::Op(Op::Semi));
                }
                '&' => match self.peek(1) {
                    Some('&') => self.op(2, Op::AndIf),
                    Some('>') => self.redirect(),
                    _ => self.op(1, Op::Background),
                },
                '|' => match self.peek(1) {
                    Some('|') => self.op(2, Op::OrIf),
                    Some('&') => self.op(2, Op::Pipe),
                    _ => self.op(1, Op::Pipe),
                },
                '(' => self.op(1, Op::Open),
                ')' => self.op(1, Op::Close),
                '<' | '>' if self.peek(1) == Some('(') => {
                    let word = self.read_word();
                    self.out.tokens.push(Token::Word(word));
                }
                '<' | '>' => self.redirect(),
                c if c.is_ascii_digit() && self.fd_redirect_ahead() => self.redirect(),
                _ => {
                    let word = self.read_word();
                    self.out.tokens.push(Token::Word(word));
                }
            }
        }
    }

    fn op(&mut self, len: usize, op: Op) {
        self.pos += len;
        self.out.tokens.push(Token::Op(op));
    }

    fn fd_redirect_ahead(&self) -> bool {
        let mut j = self.pos;
        while self.chars.get(j).is_some_and(|c| c.is_ascii_digit()) {
            j += 1;
        }
        matches!(self.chars.get(j), Some('<' | '>'))
    }

    fn redirect(&mut self) {
        while self.peek(0).is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        const OPERATORS: [&str; 12] = [
            "&>>", "&>", "<<<", "<<-", "<<", "<>", "<&", ">>", ">|", ">&", "<", ">",
        ];
        let op = OPERATORS
            .iter()
            .find(|candidate| {
                candidate
                    .chars()
                    .enumerate()
                    .all(|(k, c)| self.peek(k) == Some(c))
            })
            .map_or("<", |s| *s)
            .to_string();
        self.pos += op.chars().count();
        while self.peek(0).is_some_and(is_blank) {
            self.pos += 1;
        }
        let target = match self.peek(0) {
            Some(c) if !ends_word(c) || (matches!(c, '<' | '>') && self.peek(1) == Some('(')) => {
                Some(self.read_word())
            }
            _ => None,
        };
        let index = self.out.tokens.len();
        if let (true, Some(target_ref)) = (op == "<<" || op == "<<-", target.as_ref()) {
            self.pending.push(PendingHeredoc {
                token_index: index,
                delimiter: target_ref.value.clone(),
                strip_tabs: op == "<<-",
                expands: !target_ref.raw.contains(['\'', '"', '\\']),
            });
        }
        self.out.tokens.push(Token::Redirect(Redirect {
            op,
            target,
            heredoc_body: None,
            heredoc_span: None,
        }));
    }

    fn read_heredoc_bodies(&mut self) {
        for pending in std::mem::take(&mut self.pending) {
            let mut body = String::new();
            let body_start = self.pos;
            let mut body_end = self.pos;
            loop {
                if self.pos >= self.chars.len() {
                    break;
                }
                let line_start = self.pos;
                while self.peek(0).is_some_and(|c| c != '\n') {
                    self.pos += 1;
                }
                let line = self.slice(line_start, self.pos);
                if self.pos < self.chars.len() {
                    self.pos += 1;
                }
                let compared = if pending.strip_tabs {
                    line.trim_start_matches('\t')
                } else {
                    &line
                };
                if compared == pending.delimiter {
                    break;
                }
                body.push_str(&line);
                body.push('\n');
                body_end = self.pos;
            }
            if pending.expands {
                collect_expansion_payloads(&body, &mut self.out.payloads);
            }
            if let Some(Token::Redirect(r)) = self.out.tokens.get_mut(pending.token_index) {
                r.heredoc_body = Some(body);
                r.heredoc_span = Some((body_start, body_end));
            }
        }
    }

    fn read_word(&mut self) -> Word {
        let start = self.pos;
        let mut word = Word {
            start,
            ..Word::default()
        };
        if let Some(c @ ('<' | '>')) = self.peek(0) {
            // Process substitution `<(...)` / `>(...)`.
            self.pos += 2;
            word.value.push(c);
            self.read_paren_payload(&mut word);
        }
        while let Some(c) = self.peek(0) {
            if ends_word(c) {
                break;
            }
            match c {
                '\\' => match self.peek(1) {
                    Some('\n') => self.pos += 2,
                    Some(next) => {
                        word.value.push(next);
                        self.pos += 2;
                    }
                    None => {
                        word.value.push('\\');
                        self.pos += 1;
                    }
                },
                '\'' => {
                    self.pos += 1;
                    self.read_single_quoted(&mut word);
                }
                '"' => {
                    self.pos += 1;
                    self.read_double_quoted(&mut word);
                }
                '$' => self.read_dollar(&mut word, false),
                '`' => self.read_backtick(&mut word),
                '*' | '?' | '[' | '{' => {
                    if word.glob_at.is_none() {
                        word.glob_at = Some(word.value.len());
                    }
                    word.value.push(c);
                    self.pos += 1;
                }
                _ => {
                    word.value.push(c);
                    self.pos += 1;
                }
            }
        }
        word.end = self.pos;
        word.raw = self.slice(start, self.pos);
        if word.unterminated {
            self.out.unterminated = true;
        }
        word
    }

    fn read_single_quoted(&mut self, word: &mut Word) {
        while let Some(c) = self.peek(0) {
            self.pos += 1;
            if c == '\'' {
                return;
            }
            word.value.push(c);
        }
        word.unterminated = true;
    }

    fn read_double_quoted(&mut self, word: &mut Word) {
        while let Some(c) = self.peek(0) {
            match c {
                '"' => {
                    self.pos += 1;
                    return;
                }
                '\\' => match self.peek(1) {
                    Some(next @ ('$' | '`' | '"' | '\\')) => {
                        word.value.push(next);
                        self.pos += 2;
                    }
                    Some('\n') => self.pos += 2,
                    _ => {
                        word.value.push('\\');
                        self.pos += 1;
                    }
                },
                '$' => self.read_dollar(word, true),
                '`' => self.read_backtick(word),
                _ => {
                    word.value.push(c);
                    self.pos += 1;
                }
            }
        }
        word.unterminated = true;
    }

    fn read_dollar(&mut self, word: &mut Word, in_double_quotes: bool) {
        match self.peek(1) {
            Some('(') => {
                self.pos += 2;
                word.value.push('$');
                self.read_paren_payload(word);
            }
            Some('{') => {
                let from = self.pos;
                self.pos += 2;
                let mut depth = 1usize;
                while let Some(c) = self.peek(0) {
                    self.pos += 1;
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        '\\' => self.pos += 1,
                        _ => {}
                    }
                }
                if depth > 0 {
                    word.unterminated = true;
                }
                word.value.push_str(&self.slice(from, self.pos));
            }
            Some('\'') if !in_double_quotes => {
                self.pos += 2;
                self.read_ansi_c_quoted(word);
            }
            Some('"') if !in_double_quotes => {
                self.pos += 2;
                self.read_double_quoted(word);
            }
            _ => {
                word.value.push('$');
                self.pos += 1;
            }
        }
    }

    /// `$'...'`: decode the escapes bash decodes, so `$'\x72m'` is seen as `rm`.
    fn read_ansi_c_quoted(&mut self, word: &mut Word) {
        while let Some(c) = self.peek(0) {
            self.pos += 1;
            match c {
                '\'' => return,
                '\\' => {
                    let Some(e) = self.peek(0) else { break };
                    self.pos += 1;
                    match e {
                        'n' => word.value.push('\n'),
                        't' => word.value.push('\t'),
                        'r' => word.value.push('\r'),
                        'e' | 'E' => word.value.push('\u{1b}'),
                        'a' => word.value.push('\u{07}'),
                        'x' => {
                            let code = self.read_radix_digits(16, 2);
                            push_code(word, code);
                        }
                        'u' | 'U' => {
                            let code = self.read_radix_digits(16, if e == 'u' { 4 } else { 8 });
                            push_code(word, code);
                        }
                        '0'..='7' => {
                            self.pos -= 1;
                            let code = self.read_radix_digits(8, 3);
                            push_code(word, code);
                        }
                        other => word.value.push(other),
                    }
                }
                _ => word.value.push(c),
            }
        }
        word.unterminated = true;
    }

    fn read_radix_digits(&mut self, radix: u32, max: usize) -> Option<u32> {
        let mut value: Option<u32> = None;
        for _ in 0..max {
            let Some(d) = self.peek(0).and_then(|c| c.to_digit(radix)) else {
                break;
            };
            value = Some(value.unwrap_or(0).saturating_mul(radix).saturating_add(d));
            self.pos += 1;
        }
        value
    }

    /// Called with `pos` just after an opening `(`; records the balanced inner text as a payload.
    fn read_paren_payload(&mut self, word: &mut Word) {
        let inner_start = self.pos;
        match find_closing_paren(self.chars, inner_start) {
            Some(close) => {
                let inner = self.slice(inner_start, close);
                word.value.push('(');
                word.value.push_str(&inner);
                word.value.push(')');
                match arithmetic_body(self.chars, inner_start, close) {
                    // `$((...))` computes a number: only substitutions inside it run.
                    Some(body) => collect_expansion_payloads(&body, &mut self.out.payloads),
                    None => self.out.payloads.push(inner),
                }
                self.pos = close + 1;
            }
            None => {
                let inner = self.slice(inner_start, self.chars.len());
                word.value.push('(');
                word.value.push_str(&inner);
                self.out.payloads.push(inner);
                self.pos = self.chars.len();
                word.unterminated = true;
            }
        }
    }

    fn read_backtick(&mut self, word: &mut Word) {
        self.pos += 1;
        let mut inner = String::new();
        let mut closed = false;
        while let Some(c) = self.peek(0) {
            self.pos += 1;
            match c {
                '`' => {
                    closed = true;
                    break;
                }
                '\\' => match self.peek(0) {
                    Some(next @ ('`' | '\\' | '$')) => {
                        inner.push(next);
                        self.pos += 1;
                    }
                    _ => inner.push('\\'),
                },
                _ => inner.push(c),
            }
        }
        word.value.push('`');
        word.value.push_str(&inner);
        if closed {
            word.value.push('`');
        } else {
            word.unterminated = true;
        }
        self.out.payloads.push(inner);
    }
}

fn push_code(word: &mut Word, code: Option<u32>) {
    if let Some(c) = code.and_then(char::from_u32) {
        if c != '\0' {
            word.value.push(c);
        }
    }
}

/// Index of the `)` closing a paren opened just before `from`, skipping quoted text, escapes
/// and backticks. Iterative, so nesting depth costs nothing.
pub(crate) fn find_closing_paren(chars: &[char], from: usize) -> Option<usize> {
    let mut depth = 1usize;
    let mut i = from;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 1,
            '\'' => {
                i += 1;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
            }
            '"' => {
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    if chars[i] == '\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            '`' => {
                i += 1;
                while i < chars.len() && chars[i] != '`' {
                    if chars[i] == '\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// The body of an arithmetic expansion `$((body))`, given the span inside the outer
/// parentheses; `None` for a command substitution (`$( (cmd) )`, `$((a); (b))`).
fn arithmetic_body(chars: &[char], inner_start: usize, close: usize) -> Option<String> {
    if chars.get(inner_start) != Some(&'(') {
        return None;
    }
    let inner_close = find_closing_paren(chars, inner_start + 1)?;
    (inner_close + 1 == close).then(|| chars[inner_start + 1..inner_close].iter().collect())
}

/// Text where only `$(...)` and backticks execute (unquoted here-doc bodies).
fn collect_expansion_payloads(text: &str, payloads: &mut Vec<String>) {
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            '$' if chars.get(i + 1) == Some(&'(') => {
                let close = find_closing_paren(&chars, i + 2).unwrap_or(chars.len());
                match arithmetic_body(&chars, i + 2, close) {
                    Some(body) => collect_expansion_payloads(&body, payloads),
                    None => payloads.push(chars[i + 2..close].iter().collect()),
                }
                i = close + 1;
            }
            '`' => {
                let mut j = i + 1;
                while j < chars.len() && chars[j] != '`' {
                    j += 1;
                }
                payloads.push(chars[i + 1..j].iter().collect());
                i = j + 1;
            }
            _ => i += 1,
        }
    }
}

/// Substitutions inside a `[...]` anywhere in the text, quoted or not. Bash evaluates an
/// array subscript whenever a value is used as a number (`$((x))`, `(( x ))`, `let`,
/// `declare -i`, `[[ x -eq 1 ]]`, `${a[x]}`), and a subscript's `$(...)` runs then: so
/// `x='a[$(reboot)]'; echo $((x))` reboots although the substitution sits in single
/// quotes. Whether a quoted value is used that way is not known here: such text is
/// analysed as if it ran.
fn collect_subscript_payloads(chars: &[char], payloads: &mut Vec<String>) {
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '[' {
            i += 1;
            continue;
        }
        let mut j = i + 1;
        while j < chars.len() && chars[j] != ']' {
            match chars[j] {
                '$' if chars.get(j + 1) == Some(&'(') => {
                    let close = find_closing_paren(chars, j + 2).unwrap_or(chars.len());
                    let text: String = chars[j..(close + 1).min(chars.len())].iter().collect();
                    collect_expansion_payloads(&text, payloads);
                    j = close + 1;
                }
                '`' => {
                    let end = chars[j + 1..]
                        .iter()
                        .position(|&c| c == '`')
                        .map_or(chars.len(), |k| j + 1 + k);
                    payloads.push(chars[j + 1..end].iter().collect());
                    j = end + 1;
                }
                _ => j += 1,
            }
        }
        i = j.max(i + 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        tokenize(text)
            .tokens
            .into_iter()
            .filter_map(|t| match t {
                Token::Word(w) => Some(w.value),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn resolves_quotes_and_escapes() {
        assert_eq!(words(r#"r"m" -r'f' \/ $'\x72m'"#), ["rm", "-rf", "/", "rm"]);
    }

    #[test]
    fn collects_substitutions() {
        let lexed = tokenize(r#"echo "$(sudo reboot)" `id` <(curl x)"#);
        assert_eq!(lexed.payloads, ["sudo reboot", "id", "curl x"]);
    }

    #[test]
    fn heredoc_body_is_data() {
        let lexed = tokenize("python3 - <<'EOF'\nsudo reboot\nEOF\nls");
        let w: Vec<_> = lexed
            .tokens
            .iter()
            .filter_map(|t| {
                if let Token::Word(w) = t {
                    Some(w.value.as_str())
                } else {
                    None
                }
            })
            .collect();
        assert_eq!(w, ["python3", "-", "ls"]);
    }
}
