//! `--token-auth-file`: kube-apiserver's static bearer tokens, a CSV of
//! `token,user,uid,"group1,group2"`. A request with a known token is that
//! user (in `system:authenticated` too); one with an unknown token is
//! 401; one with none falls back to the anonymous user.

use std::collections::HashMap;
use std::path::Path;

use actix_web::http::header::HeaderMap;

use super::authentication::{Authenticated, Authenticator, Credentials, Outcome};
use crate::auth::UserInfo;
use crate::error::ApiError;

#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    #[error("reading {0}: {1}")]
    Read(String, csv::Error),
    #[error("{file}, line {line}: {why}")]
    Bad {
        file: String,
        line: u64,
        why: &'static str,
    },
}

pub struct TokenFile {
    users: HashMap<String, UserInfo>,
}

impl TokenFile {
    pub fn load(path: &Path) -> Result<TokenFile, TokenFileError> {
        let file = path.display().to_string();
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .trim(csv::Trim::All)
            .from_path(path)
            .map_err(|e| TokenFileError::Read(file.clone(), e))?;
        let mut users = HashMap::new();
        for record in reader.records() {
            let record = record.map_err(|e| TokenFileError::Read(file.clone(), e))?;
            let line = record.position().map_or(0, |p| p.line());
            let bad = |why| TokenFileError::Bad {
                file: file.clone(),
                line,
                why,
            };
            if record.len() < 3 {
                return Err(bad("need at least token, user name and uid"));
            }
            let (token, name) = (&record[0], &record[1]);
            if token.is_empty() || name.is_empty() {
                return Err(bad("the token and the user name must not be empty"));
            }
            let mut groups: Vec<String> = record
                .get(3)
                .into_iter()
                .flat_map(|g| g.split(','))
                .map(str::trim)
                .filter(|g| !g.is_empty())
                .map(str::to_string)
                .collect();
            groups.push("system:authenticated".into());
            let user = UserInfo {
                name: name.to_string(),
                groups,
                uid: record.get(2).unwrap_or("").trim().to_string(),
                ..UserInfo::default()
            };
            users.insert(token.to_string(), user);
        }
        Ok(TokenFile { users })
    }

    /// The user of the request's bearer token; None without one.
    pub fn lookup(&self, headers: &HeaderMap) -> Result<Option<UserInfo>, ApiError> {
        let Some(value) = headers.get("authorization") else {
            return Ok(None);
        };
        let token = value
            .to_str()
            .ok()
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|t| !t.is_empty());
        match token {
            Some(token) => self
                .users
                .get(token)
                .cloned()
                .map(Some)
                .ok_or(ApiError::Unauthorized),
            None => Ok(None),
        }
    }
}

/// One member of the authenticators' union: a token it does not know may
/// be another authenticator's (a service-account token), so it says
/// nothing about it and the union refuses what nobody recognises.
impl Authenticator for TokenFile {
    fn authenticate<'a>(&'a self, credentials: &'a Credentials<'a>) -> Outcome<'a> {
        let found = self.lookup(credentials.headers).ok().flatten();
        Box::pin(async move {
            Ok(found.map(|user| Authenticated {
                user,
                audiences: Vec::new(),
            }))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::http::header::{HeaderName, HeaderValue};

    fn bearer(token: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        let value = HeaderValue::from_str(&format!("Bearer {token}")).unwrap();
        headers.insert(HeaderName::from_static("authorization"), value);
        headers
    }

    #[test]
    fn tokens_name_users_and_groups_and_unknown_ones_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.csv");
        std::fs::write(
            &path,
            "admin-token,admin,1,\"system:masters,ops\"\nalice-token,alice,2\n",
        )
        .unwrap();
        let file = TokenFile::load(&path).unwrap();
        let admin = file.lookup(&bearer("admin-token")).unwrap().unwrap();
        assert_eq!(admin.name, "admin");
        assert_eq!(
            admin.groups,
            ["system:masters", "ops", "system:authenticated"]
        );
        let alice = file.lookup(&bearer("alice-token")).unwrap().unwrap();
        assert_eq!(alice.groups, ["system:authenticated"]);
        assert!(matches!(
            file.lookup(&bearer("nope")),
            Err(ApiError::Unauthorized)
        ));
        assert_eq!(file.lookup(&HeaderMap::new()).unwrap(), None);
        std::fs::write(&path, "only-a-token\n").unwrap();
        assert!(TokenFile::load(&path).is_err());
    }
}
