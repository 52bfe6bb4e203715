//! `keygen --rotate`: a new secret added to one entry of a keys file, in
//! place. The file's text is edited where the entry's secret is, and
//! nowhere else: every other entry, the order of fields, the spacing and
//! the line breaks stay as the operator wrote them (a parse and a
//! re-serialisation would sort every object's fields and reflow the
//! file). The result is checked as the server would load it before it is
//! written.

use super::file::MAX_SECRETS;
use super::table::Keys;

/// A JSON value's place in the text: `start..end`.
type Span = std::ops::Range<usize>;

/// A scanner of JSON text that finds where values are, for an edit in
/// place. It accepts what `serde_json` accepts for the shapes it walks
/// (the keys file is parsed by `serde_json` before and after the edit;
/// this only locates).
struct Scanner<'a> {
    text: &'a [u8],
    at: usize,
}

impl<'a> Scanner<'a> {
    fn blank(&mut self) {
        while self
            .text
            .get(self.at)
            .is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
        {
            self.at += 1;
        }
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        self.blank();
        (self.text.get(self.at) == Some(&byte)).then(|| self.at += 1)
    }

    fn peek(&mut self) -> Option<u8> {
        self.blank();
        self.text.get(self.at).copied()
    }

    /// A string's span, quotes included.
    fn string(&mut self) -> Option<Span> {
        self.blank();
        let start = self.at;
        self.eat(b'"')?;
        loop {
            match self.text.get(self.at)? {
                b'"' => {
                    self.at += 1;
                    return Some(start..self.at);
                }
                b'\\' => self.at += 2,
                _ => self.at += 1,
            }
        }
    }

    /// Any value's span.
    fn value(&mut self) -> Option<Span> {
        let start = {
            self.blank();
            self.at
        };
        match self.peek()? {
            b'"' => {
                self.string()?;
            }
            b'{' => {
                self.members(|_, _, _| {})?;
            }
            b'[' => {
                self.elements(|_, _| {})?;
            }
            _ => {
                while self.text.get(self.at).is_some_and(|b| {
                    !matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
                }) {
                    self.at += 1;
                }
            }
        }
        Some(start..self.at)
    }

    /// An object: `each(scanner, name, value)` for every member, with the
    /// name's text (unescaped only as far as plain names need).
    fn members(&mut self, mut each: impl FnMut(&[u8], Span, Span)) -> Option<Span> {
        self.blank();
        let start = self.at;
        self.eat(b'{')?;
        if self.eat(b'}').is_some() {
            return Some(start..self.at);
        }
        loop {
            let name = self.string()?;
            self.eat(b':')?;
            let value = self.value()?;
            each(&self.text[name.start + 1..name.end - 1], name, value);
            if self.eat(b',').is_none() {
                self.eat(b'}')?;
                return Some(start..self.at);
            }
        }
    }

    /// An array: `each(scanner, element)` for every element.
    fn elements(&mut self, mut each: impl FnMut(&mut Self, Span)) -> Option<Span> {
        self.blank();
        let start = self.at;
        self.eat(b'[')?;
        if self.eat(b']').is_some() {
            return Some(start..self.at);
        }
        loop {
            let element = self.value()?;
            each(self, element);
            if self.eat(b',').is_none() {
                self.eat(b']')?;
                return Some(start..self.at);
            }
        }
    }
}

/// The members of the object at `span`: name, name's span, value's span.
fn members_of(text: &str, span: Span) -> Vec<(String, Span, Span)> {
    let mut scanner = Scanner {
        text: &text.as_bytes()[..span.end],
        at: span.start,
    };
    let mut found = Vec::new();
    scanner.members(|name, name_span, value| {
        found.push((String::from_utf8_lossy(name).into_owned(), name_span, value));
    });
    found
}

/// `text` (a keys file the server loads) with `sha256` added to the
/// secrets of the entry named `name`, and its `expiresAt` set when
/// `expires_at` is given. Refused, saying why, when there is no such
/// entry, when it already holds two secrets, or when the result would
/// not load.
pub fn rotate(
    text: &str,
    name: &str,
    sha256: &str,
    expires_at: Option<&str>,
) -> Result<String, String> {
    Keys::parse(text.as_bytes(), None).map_err(|e| format!("the keys file does not load: {e}"))?;
    let root = Scanner {
        text: text.as_bytes(),
        at: 0,
    }
    .value()
    .ok_or("the keys file is not a JSON object")?;
    let keys = members_of(text, root)
        .into_iter()
        .find(|(field, _, _)| field == "keys")
        .map(|(_, _, value)| value)
        .ok_or("the keys file has no keys")?;
    let mut entries = Vec::new();
    Scanner {
        text: text.as_bytes(),
        at: keys.start,
    }
    .elements(|_, element| entries.push(element))
    .ok_or("the keys file's keys is not an array")?;
    // The entry whose `name` value is `name` (compared as JSON reads it).
    let entry = entries
        .into_iter()
        .find(|span| {
            members_of(text, span.clone())
                .iter()
                .any(|(field, _, value)| {
                    field == "name"
                        && serde_json::from_str::<String>(&text[value.clone()])
                            .ok()
                            .as_deref()
                            == Some(name)
                })
        })
        .ok_or_else(|| format!("no entry is named {name:?}"))?;
    let members = members_of(text, entry.clone());
    let field = |wanted: &str| {
        members
            .iter()
            .find(|(field, _, _)| field == wanted)
            .map(|(_, name, value)| (name.clone(), value.clone()))
    };
    let quoted = serde_json::to_string(sha256).map_err(|e| e.to_string())?;
    // Edits as (span to replace, new text), applied from the end so that
    // the earlier spans stay where they are.
    let mut edits: Vec<(Span, String)> = Vec::new();
    let held = usize::from(field("key").is_some())
        + match field("sha256") {
            Some((_, value)) => {
                let old = &text[value.clone()];
                match serde_json::from_str::<serde_json::Value>(old) {
                    Ok(serde_json::Value::Array(items)) => {
                        // `[a]` → `[a, new]`: before the closing bracket.
                        let close = value.end - 1;
                        let sep = if items.is_empty() { "" } else { ", " };
                        edits.push((close..close, format!("{sep}{quoted}")));
                        items.len()
                    }
                    _ => {
                        edits.push((value.clone(), format!("[{old}, {quoted}]")));
                        1
                    }
                }
            }
            None => {
                // A plain `key`: the new secret as a `sha256` beside it.
                let (_, key) = field("key").ok_or("the entry has no secret")?;
                edits.push((key.end..key.end, format!(", \"sha256\": {quoted}")));
                0
            }
        };
    if held >= MAX_SECRETS {
        return Err(format!(
            "the entry {name:?} already holds {MAX_SECRETS} secrets: remove the old one (and send SIGHUP) before rotating again"
        ));
    }
    if let Some(at) = expires_at {
        let at = serde_json::to_string(at).map_err(|e| e.to_string())?;
        match field("expiresAt") {
            Some((_, value)) => edits.push((value, at)),
            None => {
                let last = members.last().map_or(entry.start + 1, |(_, _, v)| v.end);
                let sep = if members.is_empty() { "" } else { ", " };
                edits.push((last..last, format!("{sep}\"expiresAt\": {at}")));
            }
        }
    }
    edits.sort_by_key(|(span, _)| std::cmp::Reverse(span.start));
    let mut out = text.to_owned();
    for (span, new) in edits {
        out.replace_range(span, &new);
    }
    Keys::parse(out.as_bytes(), None)
        .map_err(|e| format!("the rotated file would not load: {e}"))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::digest;
    use crate::util::hex::hex;

    const FILE: &str = r#"{
  "keys": [
    {"name": "shop-frontend", "sha256": "SHOP", "plan": "pro"},
    {"name": "local-dev", "key": "dev-123", "plan": "free"},
    {
      "name": "bigco", "sha256": ["BIG"],
      "plan": "enterprise", "perMinute": 5000, "perDay": 2000000
    }
  ],
  "plans": {"free": {"perMinute": 60, "perDay": 1000}}
}
"#;

    fn file() -> String {
        FILE.replace("SHOP", &hex(&digest("shop-old")))
            .replace("BIG", &hex(&digest("big-old")))
    }

    #[test]
    fn a_new_secret_is_added_where_the_old_one_is_and_nothing_else_moves() {
        let new = hex(&digest("shop-new"));
        let out = rotate(&file(), "shop-frontend", &new, None).unwrap();
        let old = hex(&digest("shop-old"));
        assert_eq!(
            out,
            file().replace(&format!("\"{old}\""), &format!("[\"{old}\", \"{new}\"]"))
        );
        let keys = Keys::parse(out.as_bytes(), None).unwrap();
        let (a, b) = (
            keys.lookup("shop-old").unwrap(),
            keys.lookup("shop-new").unwrap(),
        );
        assert!(std::sync::Arc::ptr_eq(a, b), "one entry, one identity");
        assert_eq!(keys.len(), 3);
        // A third secret is refused: the old one goes first.
        let third = hex(&digest("shop-third"));
        let refused = rotate(&out, "shop-frontend", &third, None).unwrap_err();
        assert!(refused.contains("already holds 2 secrets"), "{refused}");
    }

    #[test]
    fn an_array_a_plain_key_and_an_expiry_are_each_edited_in_place() {
        let new = hex(&digest("big-new"));
        let out = rotate(&file(), "bigco", &new, Some("2027-02-26T10:00:00Z")).unwrap();
        let keys = Keys::parse(out.as_bytes(), None).unwrap();
        assert!(keys.lookup("big-old").is_some() && keys.lookup("big-new").is_some());
        assert!(out.contains("\"perDay\": 2000000, \"expiresAt\": \"2027-02-26T10:00:00Z\"\n"));
        // An expiry already there is replaced.
        let again = rotate(
            &out.replace(&format!(", \"{new}\""), ""),
            "bigco",
            &new,
            Some("2028-01-01T00:00:00Z"),
        )
        .unwrap();
        assert!(again.contains("\"expiresAt\": \"2028-01-01T00:00:00Z\""));
        assert!(!again.contains("2027-02-26"));

        let dev = hex(&digest("dev-456"));
        let out = rotate(&file(), "local-dev", &dev, None).unwrap();
        assert!(out.contains(&format!(r#""key": "dev-123", "sha256": "{dev}", "plan""#)));
        let keys = Keys::parse(out.as_bytes(), None).unwrap();
        assert_eq!(keys.lookup("dev-456").map(|e| e.name), Some("local-dev"));
    }

    #[test]
    fn no_such_entry_or_a_broken_file_is_refused_and_changes_nothing() {
        let new = hex(&digest("x"));
        assert!(rotate(&file(), "nobody", &new, None)
            .unwrap_err()
            .contains("no entry is named \"nobody\""));
        assert!(rotate("{", "bigco", &new, None).is_err());
        // The new secret is another entry's: the result would not load.
        let taken = hex(&digest("dev-123"));
        assert!(rotate(&file(), "bigco", &taken, None)
            .unwrap_err()
            .contains("duplicate key"));
        assert!(rotate(&file(), "bigco", &new, Some("soon")).is_err());
    }
}
