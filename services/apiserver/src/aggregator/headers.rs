//! The headers of a proxied request: the client's, less its credentials
//! (the backend trusts the front-proxy certificate instead), any
//! X-Remote-* it tried to set itself, and the hop-by-hop ones; plus
//! kube's X-Remote-User / X-Remote-Uid / X-Remote-Group / X-Remote-Extra-<key>
//! naming the user this server authenticated (and authorized).

use std::collections::BTreeMap;

pub const REMOTE_USER: &str = "X-Remote-User";
pub const REMOTE_UID: &str = "X-Remote-Uid";
pub const REMOTE_GROUP: &str = "X-Remote-Group";
pub const REMOTE_EXTRA: &str = "X-Remote-Extra-";

/// Who the backend is told the request is from.
pub struct Identity<'a> {
    pub name: &'a str,
    pub uid: &'a str,
    pub groups: &'a [String],
    pub extra: &'a BTreeMap<String, Vec<String>>,
}

/// Headers that belong to one connection, not to the request.
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Whether a client's header goes on to the backend.
fn passed_on(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    let credential = name == "authorization" || name.starts_with("impersonate-");
    let claimed = name.starts_with("x-remote-");
    !(credential || claimed || name == "host" || HOP_BY_HOP.contains(&name.as_str()))
}

/// The backend's request headers from the client's `(name, value)` pairs.
pub fn outgoing<'h>(
    client: impl Iterator<Item = (&'h str, &'h [u8])>,
    who: &Identity<'_>,
) -> Vec<(String, Vec<u8>)> {
    let mut headers: Vec<(String, Vec<u8>)> = client
        .filter(|(name, _)| passed_on(name))
        .map(|(name, value)| (name.to_string(), value.to_vec()))
        .collect();
    let mut add = |name: String, value: &str| headers.push((name, value.as_bytes().to_vec()));
    add(REMOTE_USER.into(), who.name);
    if !who.uid.is_empty() {
        add(REMOTE_UID.into(), who.uid);
    }
    for group in who.groups {
        add(REMOTE_GROUP.into(), group);
    }
    for (key, values) in who.extra {
        for value in values {
            add(format!("{REMOTE_EXTRA}{}", escape_key(key)), value);
        }
    }
    headers
}

/// kube's headerKeyEscape: a key's characters that may not be in a
/// header name (and `%` itself) percent-encoded, so `example.com/scopes`
/// travels as `example.com%2fscopes`.
pub fn escape_key(key: &str) -> String {
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$&'*+-.^_`|~".contains(c);
    key.chars()
        .map(|c| match token(c) {
            true => c.to_string(),
            false => {
                let mut buf = [0u8; 4];
                let bytes = c.encode_utf8(&mut buf).as_bytes();
                bytes.iter().map(|b| format!("%{b:02x}")).collect()
            }
        })
        .collect()
}

/// The inverse of [`escape_key`], for requestheader authentication.
pub fn unescape_key(key: &str) -> String {
    let bytes = key.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_and_claimed_identities_are_replaced_by_the_users() {
        let groups = vec!["system:authenticated".to_string(), "dev".to_string()];
        let mut extra = BTreeMap::new();
        extra.insert("example.com/scopes".to_string(), vec!["a".to_string()]);
        let who = Identity {
            name: "jane",
            uid: "42",
            groups: &groups,
            extra: &extra,
        };
        let client: Vec<(&str, &[u8])> = vec![
            ("Authorization", b"Bearer secret"),
            ("X-Remote-User", b"system:admin"),
            ("x-remote-group", b"system:masters"),
            ("Impersonate-User", b"root"),
            ("Accept", b"application/json"),
            ("Connection", b"keep-alive"),
            ("Host", b"127.0.0.1:6443"),
        ];
        let out = outgoing(client.into_iter(), &who);
        let shown: Vec<(&str, &str)> = out
            .iter()
            .map(|(n, v)| (n.as_str(), std::str::from_utf8(v).unwrap()))
            .collect();
        assert_eq!(
            shown,
            [
                ("Accept", "application/json"),
                ("X-Remote-User", "jane"),
                ("X-Remote-Uid", "42"),
                ("X-Remote-Group", "system:authenticated"),
                ("X-Remote-Group", "dev"),
                ("X-Remote-Extra-example.com%2fscopes", "a"),
            ]
        );
    }

    #[test]
    fn extra_keys_escape_and_unescape() {
        assert_eq!(escape_key("a/b%c"), "a%2fb%25c");
        assert_eq!(unescape_key("A%2Fb%25c"), "a/b%c");
    }
}
