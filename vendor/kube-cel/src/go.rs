//! Go's parsers and apimachinery's name validations, as far as the Kubernetes CEL libraries'
//! errors need them: which strings Go refuses, and its words for each refusal.
//! `staging/src/k8s.io/apiserver/pkg/cel/library` parses with Go's `net/netip` (`ip`,
//! `cidr`), `net/url` (`url`) and apimachinery's `resource.ParseQuantity` (`quantity`), and
//! validates `format` names with `k8s.io/apimachinery/pkg/util/validation`, putting their
//! error text in what a user reads; the Rust parsers here refuse other strings, in other words.
//! Ported from Go 1.23 (`src/net/netip/netip.go`, `src/net/url/url.go`) and apimachinery 0.32
//! (`pkg/api/resource/quantity.go`, `pkg/util/validation/validation.go`). admission-proxy's
//! configuration validation uses the name validations too (`qualified_name`, `label_value`).

/// `strconv.Quote(s)`: `s` in double quotes, with Go's escapes.
pub(crate) fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c == ' ' || !(c.is_control() || c.is_whitespace()) => out.push(c),
            c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push('"');
    out
}

/// What `netip.ParseAddr` made of a string it accepted.
#[derive(Debug, PartialEq)]
pub(crate) struct Addr {
    /// An IPv6 address (else IPv4).
    pub(crate) is6: bool,
    /// The IPv6 zone (`fe80::1%eth0`), empty when none.
    pub(crate) zone: String,
    /// `::ffff:a.b.c.d` (`Is4In6`).
    pub(crate) is4in6: bool,
}

/// `netip.ParseAddr(s)`'s refusal: `ParseAddr("<s>"): <why>[ (at "<rest>")]`.
pub(crate) fn parse_addr(s: &str) -> Result<Addr, String> {
    let error = |msg: &str, at: &str| {
        if at.is_empty() {
            format!("ParseAddr({}): {msg}", quote(s))
        } else {
            format!("ParseAddr({}): {msg} (at {})", quote(s), quote(at))
        }
    };
    for b in s.bytes() {
        match b {
            b'.' => {
                return ipv4_fields(s.as_bytes(), 0, s.len(), s).map(|_| Addr {
                    is6: false,
                    zone: String::new(),
                    is4in6: false,
                })
            }
            b':' => return parse_ipv6(s),
            b'%' => return Err(error("missing IPv6 address", "")),
            _ => {}
        }
    }
    Err(error("unable to parse IP", ""))
}

/// `parseIPv4Fields(in, off, end, fields)`: the four fields of `input[off..end]`.
fn ipv4_fields(input: &[u8], off: usize, end: usize, whole: &str) -> Result<[u8; 4], String> {
    let error = |msg: &str, at: &[u8]| {
        let at = String::from_utf8_lossy(at);
        if at.is_empty() {
            format!("ParseAddr({}): {msg}", quote(whole))
        } else {
            format!("ParseAddr({}): {msg} (at {})", quote(whole), quote(&at))
        }
    };
    let s = &input[off..end];
    let (mut val, mut pos, mut dig_len) = (0u32, 0usize, 0usize);
    let mut fields = [0u8; 4];
    for i in 0..s.len() {
        match s[i] {
            c @ b'0'..=b'9' => {
                if dig_len == 1 && val == 0 {
                    return Err(error("IPv4 field has octet with leading zero", b""));
                }
                val = val * 10 + u32::from(c - b'0');
                dig_len += 1;
                if val > 255 {
                    return Err(error("IPv4 field has value >255", b""));
                }
            }
            b'.' => {
                if i == 0 || i == s.len() - 1 || s[i - 1] == b'.' {
                    return Err(error("IPv4 field must have at least one digit", &s[i..]));
                }
                if pos == 3 {
                    return Err(error("IPv4 address too long", b""));
                }
                fields[pos] = val as u8;
                pos += 1;
                val = 0;
                dig_len = 0;
            }
            _ => return Err(error("unexpected character", &s[i..])),
        }
    }
    if pos < 3 {
        return Err(error("IPv4 address too short", b""));
    }
    fields[3] = val as u8;
    Ok(fields)
}

/// `parseIPv6(in)`.
fn parse_ipv6(input: &str) -> Result<Addr, String> {
    let error = |msg: &str, at: &[u8]| {
        let at = String::from_utf8_lossy(at);
        if at.is_empty() {
            format!("ParseAddr({}): {msg}", quote(input))
        } else {
            format!("ParseAddr({}): {msg} (at {})", quote(input), quote(&at))
        }
    };
    let (mut s, zone) = match input.find('%') {
        Some(i) => {
            let zone = &input[i + 1..];
            if zone.is_empty() {
                return Err(error("zone must be a non-empty string", b""));
            }
            (&input.as_bytes()[..i], zone)
        }
        None => (input.as_bytes(), ""),
    };
    let addr = |ip: [u8; 16]| Addr {
        is6: true,
        zone: zone.to_string(),
        is4in6: ip[..10].iter().all(|&b| b == 0) && ip[10] == 0xff && ip[11] == 0xff,
    };
    let mut ip = [0u8; 16];
    let mut ellipsis: Option<usize> = None;
    if s.len() >= 2 && s[0] == b':' && s[1] == b':' {
        ellipsis = Some(0);
        s = &s[2..];
        if s.is_empty() {
            return Ok(addr(ip));
        }
    }
    let mut i = 0;
    while i < 16 {
        let mut off = 0;
        let mut acc: u32 = 0;
        while off < s.len() {
            let c = s[off];
            let digit = match c {
                b'0'..=b'9' => c - b'0',
                b'a'..=b'f' => c - b'a' + 10,
                b'A'..=b'F' => c - b'A' + 10,
                _ => break,
            };
            acc = (acc << 4) + u32::from(digit);
            if off > 3 {
                return Err(error("each group must have 4 or less digits", s));
            }
            if acc > 0xffff {
                return Err(error("IPv6 field has value >=2^16", s));
            }
            off += 1;
        }
        if off == 0 {
            return Err(error(
                "each colon-separated field must have at least one digit",
                s,
            ));
        }
        if off < s.len() && s[off] == b'.' {
            if ellipsis.is_none() && i != 12 {
                return Err(error(
                    "embedded IPv4 address must replace the final 2 fields of the address",
                    s,
                ));
            }
            if i + 4 > 16 {
                return Err(error(
                    "too many hex fields to fit an embedded IPv4 at the end of the address",
                    s,
                ));
            }
            let mut end = input.len();
            if !zone.is_empty() {
                end -= zone.len() + 1;
            }
            let fields = ipv4_fields(input.as_bytes(), end - s.len(), end, input)?;
            ip[i..i + 4].copy_from_slice(&fields);
            s = &[];
            i += 4;
            break;
        }
        ip[i] = (acc >> 8) as u8;
        ip[i + 1] = acc as u8;
        i += 2;
        s = &s[off..];
        if s.is_empty() {
            break;
        }
        if s[0] != b':' {
            return Err(error("unexpected character, want colon", s));
        } else if s.len() == 1 {
            return Err(error("colon must be followed by more characters", s));
        }
        s = &s[1..];
        if s[0] == b':' {
            if ellipsis.is_some() {
                return Err(error("multiple :: in address", s));
            }
            ellipsis = Some(i);
            s = &s[1..];
            if s.is_empty() {
                break;
            }
        }
    }
    if !s.is_empty() {
        return Err(error("trailing garbage after address", s));
    }
    if i < 16 {
        let Some(e) = ellipsis else {
            return Err(error("address string too short", b""));
        };
        let n = 16 - i;
        for j in (e..i).rev() {
            ip[j + n] = ip[j];
        }
        for b in &mut ip[e..e + n] {
            *b = 0;
        }
    } else if ellipsis.is_some() {
        return Err(error("the :: must expand to at least one field of zeros", b""));
    }
    Ok(addr(ip))
}

/// `netip.ParsePrefix(s)`'s refusal: `netip.ParsePrefix("<s>"): <why>`; the address it
/// accepted otherwise.
pub(crate) fn parse_prefix(s: &str) -> Result<Addr, String> {
    let error = |msg: &str| format!("netip.ParsePrefix({}): {msg}", quote(s));
    let Some(i) = s.rfind('/') else {
        return Err(error("no '/'"));
    };
    let addr = parse_addr(&s[..i]).map_err(|e| error(&e))?;
    if addr.is6 && !addr.zone.is_empty() {
        return Err(error("IPv6 zones cannot be present in a prefix"));
    }
    let bits = &s[i + 1..];
    let bad = || error(&format!("bad bits after slash: {}", quote(bits)));
    if bits.len() > 1 && !(b'1'..=b'9').contains(&bits.as_bytes()[0]) {
        return Err(bad());
    }
    // `strconv.Atoi`: an optional sign, then digits that fit an int.
    let digits = bits.strip_prefix(['+', '-']).unwrap_or(bits);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let bits: i64 = bits.parse().map_err(|_| bad())?;
    let max = if addr.is6 { 128 } else { 32 };
    if !(0..=max).contains(&bits) {
        return Err(error("prefix length out of range"));
    }
    Ok(addr)
}

/// `url.ParseRequestURI(s)`'s refusal: `parse "<s>": <why>`.
pub(crate) fn parse_request_uri(s: &str) -> Result<(), String> {
    request_uri(s).map_err(|why| format!("parse {}: {why}", quote(s)))
}

/// `parse(rawURL, viaRequest=true)`.
fn request_uri(raw: &str) -> Result<(), String> {
    if raw.bytes().any(|b| b < b' ' || b == 0x7f) {
        return Err("net/url: invalid control character in URL".into());
    }
    if raw.is_empty() {
        return Err("empty url".into());
    }
    if raw == "*" {
        return Ok(());
    }
    let (scheme, rest) = scheme(raw)?;
    let rest = if rest.ends_with('?') && rest.matches('?').count() == 1 {
        &rest[..rest.len() - 1]
    } else {
        rest.split_once('?').map_or(rest, |(r, _)| r)
    };
    if !rest.starts_with('/') {
        if !scheme.is_empty() {
            // An opaque URL (`mailto:x`).
            return Ok(());
        }
        return Err("invalid URI for request".into());
    }
    let mut path = rest;
    if !scheme.is_empty() && rest.starts_with("//") {
        let authority = &rest[2..];
        let (authority, after) = match authority.find('/') {
            Some(i) => (&authority[..i], &authority[i..]),
            None => (authority, ""),
        };
        parse_authority(authority)?;
        path = after;
    }
    unescape(path, Mode::Path)
}

/// `getScheme(rawURL)`: the scheme and the rest.
fn scheme(raw: &str) -> Result<(&str, &str), String> {
    for (i, c) in raw.bytes().enumerate() {
        match c {
            b'a'..=b'z' | b'A'..=b'Z' => {}
            b'0'..=b'9' | b'+' | b'-' | b'.' if i == 0 => return Ok(("", raw)),
            b'0'..=b'9' | b'+' | b'-' | b'.' => {}
            b':' if i == 0 => return Err("missing protocol scheme".into()),
            b':' => return Ok((&raw[..i], &raw[i + 1..])),
            _ => return Ok(("", raw)),
        }
    }
    Ok(("", raw))
}

/// `parseAuthority(authority)`.
fn parse_authority(authority: &str) -> Result<(), String> {
    let at = authority.rfind('@');
    parse_host(at.map_or(authority, |i| &authority[i + 1..]))?;
    let Some(i) = at else { return Ok(()) };
    let userinfo = &authority[..i];
    let valid = userinfo.chars().all(|r| {
        r.is_ascii_alphanumeric()
            || matches!(
                r,
                '-' | '.'
                    | '_'
                    | ':'
                    | '~'
                    | '!'
                    | '$'
                    | '&'
                    | '\''
                    | '('
                    | ')'
                    | '*'
                    | '+'
                    | ','
                    | ';'
                    | '='
                    | '%'
                    | '@'
            )
    });
    if !valid {
        return Err("net/url: invalid userinfo".into());
    }
    for part in userinfo.splitn(2, ':') {
        unescape(part, Mode::UserPassword)?;
    }
    Ok(())
}

/// `parseHost(host)`.
fn parse_host(host: &str) -> Result<(), String> {
    let valid_port = |port: &str| {
        port.is_empty() || (port.starts_with(':') && port[1..].bytes().all(|b| b.is_ascii_digit()))
    };
    if host.starts_with('[') {
        let Some(i) = host.rfind(']') else {
            return Err("missing ']' in host".into());
        };
        let colon_port = &host[i + 1..];
        if !valid_port(colon_port) {
            return Err(format!("invalid port {} after host", quote(colon_port)));
        }
        if let Some(zone) = host[..i].find("%25") {
            unescape(&host[..zone], Mode::Host)?;
            unescape(&host[zone..i], Mode::Zone)?;
            return unescape(&host[i..], Mode::Host);
        }
    } else if let Some(i) = host.rfind(':') {
        let colon_port = &host[i..];
        if !valid_port(colon_port) {
            return Err(format!("invalid port {} after host", quote(colon_port)));
        }
    }
    unescape(host, Mode::Host)
}

/// `encoding`: which part of a URL `unescape` reads.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Path,
    UserPassword,
    Host,
    Zone,
}

/// `unescape(s, mode)`'s refusal: a `%` escape that is not two hex digits, an escape or a
/// character a host may not hold.
fn unescape(s: &str, mode: Mode) -> Result<(), String> {
    let b = s.as_bytes();
    let hex = |c: u8| c.is_ascii_hexdigit();
    let unhex = |c: u8| (c as char).to_digit(16).unwrap_or(0) as u8;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                if i + 2 >= b.len() || !hex(b[i + 1]) || !hex(b[i + 2]) {
                    let end = (i + 3).min(b.len());
                    let bad = String::from_utf8_lossy(&b[i..end]);
                    return Err(format!("invalid URL escape {}", quote(&bad)));
                }
                let escape = &s[i..i + 3];
                if mode == Mode::Host && unhex(b[i + 1]) < 8 && escape != "%25" {
                    return Err(format!("invalid URL escape {}", quote(escape)));
                }
                if mode == Mode::Zone {
                    let v = (unhex(b[i + 1]) << 4) | unhex(b[i + 2]);
                    if escape != "%25" && v != b' ' && should_escape_host(v) {
                        return Err(format!("invalid URL escape {}", quote(escape)));
                    }
                }
                i += 3;
            }
            c => {
                if matches!(mode, Mode::Host | Mode::Zone) && c < 0x80 && should_escape_host(c) {
                    return Err(format!(
                        "invalid character {} in host name",
                        quote(&(c as char).to_string())
                    ));
                }
                i += 1;
            }
        }
    }
    Ok(())
}

/// `shouldEscape(c, encodeHost)`.
fn should_escape_host(c: u8) -> bool {
    !(c.is_ascii_alphanumeric()
        || matches!(
            c,
            b'!' | b'$'
                | b'&'
                | b'\''
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b','
                | b';'
                | b'='
                | b':'
                | b'['
                | b']'
                | b'<'
                | b'>'
                | b'"'
                | b'-'
                | b'_'
                | b'.'
                | b'~'
        ))
}

/// `ErrFormatWrong`: a string `resource.ParseQuantity` cannot split.
pub(crate) const QUANTITY_FORMAT: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
/// `ErrSuffix`.
pub(crate) const QUANTITY_SUFFIX: &str = "unable to parse quantity's suffix";
/// `resource.ParseQuantity(s)`'s refusal, in its words ([`QUANTITY_FORMAT`],
/// [`QUANTITY_SUFFIX`]); else the number and the suffix as it splits them (`"1.5"`, `"Ki"`).
/// A number without digits (`"."`, `"-"`, `""` before `e3`) is zero, as Go takes it.
pub(crate) fn parse_quantity(s: &str) -> Result<(&str, &str), &'static str> {
    if s.is_empty() {
        return Err(QUANTITY_FORMAT);
    }
    if s == "0" {
        return Ok(("0", ""));
    }
    let (value, suffix) = quantity_parts(s.as_bytes())?;
    let suffix_ok = match suffix {
        "" | "n" | "u" | "m" | "k" | "M" | "G" | "T" | "P" | "E" => true,
        "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" => true,
        // `suffixHandler.interpret`: `e`/`E` and an int64 exponent.
        _ if suffix.len() > 1 && suffix.starts_with(['e', 'E']) => {
            suffix[1..].parse::<i64>().is_ok()
        }
        _ => false,
    };
    if !suffix_ok {
        return Err(QUANTITY_SUFFIX);
    }
    Ok((value, suffix))
}

/// `parseQuantityString(str)`: the number (`value`) and the suffix.
fn quantity_parts(b: &[u8]) -> Result<(&str, &str), &'static str> {
    let text = |from: usize, to: usize| std::str::from_utf8(&b[from..to]).unwrap_or("");
    let end = b.len();
    let mut pos = 0;
    if pos < end && (b[0] == b'-' || b[0] == b'+') {
        pos += 1;
    }
    // Leading zeros; all zeros is zero.
    while pos < end && b[pos] == b'0' {
        pos += 1;
    }
    if pos >= end {
        return Ok(("0", ""));
    }
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos >= end {
        return Ok((text(0, end), ""));
    }
    if b[pos] == b'.' {
        pos += 1;
        while pos < end && b[pos].is_ascii_digit() {
            pos += 1;
        }
        if pos >= end {
            return Ok((text(0, end), ""));
        }
    }
    let value = text(0, pos);
    let suffix_start = pos;
    while pos < end && b"eEinumkKMGTP".contains(&b[pos]) {
        pos += 1;
    }
    if pos >= end {
        return Ok((value, text(suffix_start, end)));
    }
    if b[pos] == b'-' || b[pos] == b'+' {
        pos += 1;
    }
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos >= end {
        return Ok((value, text(suffix_start, end)));
    }
    Err(QUANTITY_FORMAT)
}

/// `RegexError` (`k8s.io/apimachinery/pkg/util/validation`), spaced as apimachinery writes it.
fn regex_error(msg: &str, format: &str, examples: &[&str]) -> String {
    let mut out = format!("{msg} (e.g. ");
    for (i, example) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push_str(&format!("'{example}', "));
    }
    out.push_str(&format!("regex used for validation is '{format}')"));
    out
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?` (`first` narrows the first character).
fn is_label(s: &str, first: fn(u8) -> bool) -> bool {
    let b = s.as_bytes();
    let inner = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-';
    let end = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !b.is_empty() && first(b[0]) && end(b[b.len() - 1]) && b.iter().all(|&c| inner(c))
}

fn lower_or_digit(c: u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

/// `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`.
fn is_qualified_part(s: &str) -> bool {
    let b = s.as_bytes();
    let inner = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.');
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter().all(|&c| inner(c))
}

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_SUBDOMAIN_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_ERR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

/// `IsDNS1123Label`.
fn dns1123_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    if !is_label(s, lower_or_digit) {
        errs.push(regex_error(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
            DNS1123_LABEL_FMT,
            &["my-name", "123-abc"],
        ));
    }
    errs
}

/// `IsDNS1123Subdomain`.
fn dns1123_subdomain(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 253 {
        errs.push("must be no more than 253 characters".to_string());
    }
    if !(!s.is_empty() && s.split('.').all(|l| is_label(l, lower_or_digit))) {
        errs.push(regex_error(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

/// `IsDNS1035Label`.
fn dns1035_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    if !is_label(s, |c| c.is_ascii_lowercase()) {
        errs.push(regex_error(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character",
            "[a-z]([-a-z0-9]*[a-z0-9])?",
            &["my-name", "abc-123"],
        ));
    }
    errs
}

/// `IsQualifiedName`'s messages, in order; empty when `value` is a qualified name.
pub fn qualified_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let regex = || regex_error(QUALIFIED_NAME_ERR, QUALIFIED_NAME_FMT, &["MyName", "my.name", "123-abc"]);
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                errs.extend(dns1123_subdomain(prefix).into_iter().map(|m| format!("prefix part {m}")));
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex()
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 characters".to_string());
    }
    if !is_qualified_part(name) {
        errs.push(format!("name part {}", regex()));
    }
    errs
}

/// `IsValidLabelValue`'s messages, in order; empty when `value` is a label value.
pub fn label_value(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    if !value.is_empty() && !is_qualified_part(value) {
        errs.push(regex_error(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
            "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?",
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// `maskTrailingDash` (`k8s.io/apimachinery/pkg/api/validation/generic.go`): a prefix may end
/// in `-`; the last two characters become `a`, as apimachinery has it.
fn mask_trailing_dash(name: &str) -> String {
    if name.len() > 1 && name.ends_with('-') {
        format!("{}a", &name[..name.len() - 2])
    } else {
        name.to_string()
    }
}

/// strfmt's `IsUUID`: `(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$`.
fn is_uuid(s: &str) -> bool {
    let mut rest = s.as_bytes();
    for (i, len) in [8, 4, 4, 4, 12].into_iter().enumerate() {
        if i > 0 {
            if let Some((b'-', r)) = rest.split_first() {
                rest = r;
            }
        }
        if rest.len() < len || !rest[..len].iter().all(u8::is_ascii_hexdigit) {
            return false;
        }
        rest = &rest[len..];
    }
    rest.is_empty()
}

/// govalidator's `IsBase64`: whole groups of four, the last one possibly padded.
fn is_base64(s: &str) -> bool {
    let b = s.as_bytes();
    let alphabet = |c: u8| c.is_ascii_alphanumeric() || c == b'+' || c == b'/';
    if b.is_empty() || b.len() % 4 != 0 {
        return false;
    }
    let (body, last) = b.split_at(b.len() - 4);
    body.iter().all(|&c| alphabet(c))
        && match last {
            [a, b, b'=', b'='] => alphabet(*a) && alphabet(*b),
            [a, b, c, b'='] => alphabet(*a) && alphabet(*b) && alphabet(*c),
            other => other.iter().all(|&c| alphabet(c)),
        }
}

/// Go's `time.Parse("2006-01-02", s)`.
fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let digits = |r: std::ops::Range<usize>| {
        b[r.clone()].iter().all(u8::is_ascii_digit).then(|| s[r].parse::<u32>().ok()).flatten()
    };
    let (Some(year), Some(month), Some(day)) = (digits(0..4), digits(5..7), digits(8..10)) else {
        return false;
    };
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&day)
}

/// strfmt's `IsDateTime`: a date, `t`, then `hh:mm:ss[.frac](z|±hh:mm)` within 23:59:59.
fn is_datetime(s: &str) -> bool {
    if s.len() < 4 {
        return false;
    }
    let lower = s.to_lowercase();
    let parts: Vec<&str> = lower.split('t').collect();
    if parts.len() < 2 || !is_date(parts[0]) {
        return false;
    }
    let t = parts[1].as_bytes();
    let two = |i: usize| t.len() >= i + 2 && t[i].is_ascii_digit() && t[i + 1].is_ascii_digit();
    if !(two(0) && t.get(2) == Some(&b':') && two(3) && t.get(5) == Some(&b':') && two(6)) {
        return false;
    }
    let mut i = 8;
    // `(.[0-9]+)?`: any character, then digits.
    if t.len() > i + 1 && t[i] != b'z' && t[i] != b'+' && t[i] != b'-' {
        i += 1;
        let start = i;
        while i < t.len() && t[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return false;
        }
    }
    let zone = &t[i..];
    let zone_ok = zone == b"z"
        || (zone.len() == 6
            && matches!(zone[0], b'+' | b'-')
            && zone[1].is_ascii_digit()
            && zone[2].is_ascii_digit()
            && zone[3] == b':'
            && zone[4].is_ascii_digit()
            && zone[5].is_ascii_digit());
    let part = |i: usize| &parts[1][i..i + 2];
    zone_ok && part(0) <= "23" && part(3) <= "59" && part(6) <= "59"
}

/// What `format.<name>().validate(s)` returns (`staging/src/k8s.io/apiserver/pkg/cel/library/format.go`):
/// apimachinery's and strfmt's messages; empty when `s` is valid.
pub(crate) fn format_errors(name: &str, s: &str) -> Vec<String> {
    let one = |ok: bool, message: &str| {
        if ok {
            Vec::new()
        } else {
            vec![message.to_string()]
        }
    };
    match name {
        "dns1123Label" => dns1123_label(s),
        "dns1123Subdomain" => dns1123_subdomain(s),
        "dns1035Label" => dns1035_label(s),
        "qualifiedName" => qualified_name(s),
        "dns1123LabelPrefix" => dns1123_label(&mask_trailing_dash(s)),
        "dns1123SubdomainPrefix" => dns1123_subdomain(&mask_trailing_dash(s)),
        "dns1035LabelPrefix" => dns1035_label(&mask_trailing_dash(s)),
        "labelValue" => label_value(s),
        "uri" => parse_request_uri(s).err().into_iter().collect(),
        "uuid" => one(is_uuid(s), "does not match the UUID format"),
        "byte" => one(is_base64(s), "invalid base64"),
        "date" => one(is_date(s), "invalid date"),
        "datetime" => one(is_datetime(s), "invalid datetime"),
        _ => Vec::new(),
    }
}
