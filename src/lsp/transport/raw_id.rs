//! The `id` of a message as the client wrote it.
//!
//! serde_json (without `arbitrary_precision`) reads `18446744073709551617`
//! as a float, so an error built from a parsed `Value` would echo an id the
//! client cannot match. Errors this layer writes itself carry the id's raw
//! text instead, cut out of the body.

/// The raw text of the top-level `"id"` member of a body that already parsed
/// as JSON; `None` if there is none (or the body is not an object).
pub fn raw_id(body: &[u8]) -> Option<&str> {
    members(body).id
}

/// What the top level of a message holds, found without parsing it.
#[derive(Debug, Default, PartialEq)]
pub struct Members<'a> {
    /// The raw text of the `"id"` member.
    pub id: Option<&'a str>,
    /// Whether there is a `"method"` member (a request or a notification,
    /// not a response).
    pub method: bool,
}

pub fn members(body: &[u8]) -> Members<'_> {
    let mut found = Members::default();
    let mut at = skip_ws(body, 0);
    if body.get(at) != Some(&b'{') {
        return found;
    }
    at += 1;
    loop {
        at = skip_ws(body, at);
        if body.get(at) != Some(&b'"') {
            return found; // `}` (or, unreachable for valid JSON, junk).
        }
        let Some(key_end) = skip_string(body, at) else {
            return found;
        };
        let key = &body[at..key_end];
        at = skip_ws(body, key_end);
        if body.get(at) != Some(&b':') {
            return found;
        }
        let start = skip_ws(body, at + 1);
        let Some(end) = skip_value(body, start) else {
            return found;
        };
        // Like serde_json, the last of duplicate keys wins.
        if key == b"\"id\"" {
            found.id = std::str::from_utf8(&body[start..end]).ok();
        }
        found.method |= key == b"\"method\"";
        at = skip_ws(body, end);
        if body.get(at) == Some(&b',') {
            at += 1;
        }
    }
}

fn skip_ws(body: &[u8], mut at: usize) -> usize {
    while body.get(at).is_some_and(u8::is_ascii_whitespace) {
        at += 1;
    }
    at
}

/// `at` is on an opening quote; returns the index past the closing one.
fn skip_string(body: &[u8], mut at: usize) -> Option<usize> {
    at += 1;
    loop {
        match body.get(at)? {
            b'\\' => at += 2,
            b'"' => return Some(at + 1),
            _ => at += 1,
        }
    }
}

fn skip_value(body: &[u8], mut at: usize) -> Option<usize> {
    match body.get(at)? {
        b'"' => skip_string(body, at),
        b'{' | b'[' => {
            let mut depth = 0usize;
            loop {
                match body.get(at)? {
                    b'"' => {
                        at = skip_string(body, at)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(at + 1);
                        }
                    }
                    _ => {}
                }
                at += 1;
            }
        }
        _ => {
            while body
                .get(at)
                .is_some_and(|b| !matches!(b, b',' | b'}' | b']') && !b.is_ascii_whitespace())
            {
                at += 1;
            }
            Some(at)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::raw_id;

    #[test]
    fn finds_the_top_level_id_verbatim() {
        let cases: [(&str, Option<&str>); 7] = [
            (
                r#"{"id":18446744073709551617}"#,
                Some("18446744073709551617"),
            ),
            (r#" { "a" : {"id":1}, "id" : 1.50e3 } "#, Some("1.50e3")),
            (r#"{"x":"\"id\":2","id":"a\"b"}"#, Some(r#""a\"b""#)),
            (r#"{"id":[1,{"id":2}]}"#, Some(r#"[1,{"id":2}]"#)),
            (r#"{"id":1,"id":-2}"#, Some("-2")),
            (r#"{"method":"m"}"#, None),
            ("[1]", None),
        ];
        for (body, want) in cases {
            assert_eq!(raw_id(body.as_bytes()), want, "{body}");
        }
    }
}
