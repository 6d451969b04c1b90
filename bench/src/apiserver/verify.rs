//! Checks after a create run, against what the API server then holds:
//! what was acknowledged was stored, once, under its own resourceVersion.

use std::collections::HashSet;

use super::answers;
use super::error::{ApiError, WrongAnswer};
use super::http::Connection;
use super::{collection, CREATE_NAMESPACE};

/// Every acknowledged create has a distinct resourceVersion (each is a
/// separate store revision), a consistent list of the namespace holds
/// every acknowledged object, and it holds no more than were attempted
/// (a create that timed out may still have happened). A summary.
pub async fn check_creates(
    http: &mut Connection,
    created: &[(String, String)],
    errors: u64,
) -> Result<String, ApiError> {
    let wrong = |field, got: String, want: String| ApiError::Wrong {
        what: format!("after the creates, {CREATE_NAMESPACE}"),
        source: WrongAnswer::Field { field, got, want },
    };
    let versions: HashSet<&str> = created.iter().map(|(_, v)| v.as_str()).collect();
    if versions.len() != created.len() {
        let got = format!("{} distinct", versions.len());
        return Err(wrong("resourceVersions", got, created.len().to_string()));
    }
    let answer = http.get(&collection(CREATE_NAMESPACE)).await?;
    let names = answers::list_names(&answer).map_err(|source| ApiError::Wrong {
        what: format!("list {CREATE_NAMESPACE}"),
        source,
    })?;
    let stored: HashSet<&str> = names.iter().map(String::as_str).collect();
    if let Some((missing, _)) = created.iter().find(|(n, _)| !stored.contains(n.as_str())) {
        return Err(wrong(
            "a created ConfigMap",
            "missing".into(),
            missing.clone(),
        ));
    }
    let most = created.len() as u64 + errors;
    if names.len() as u64 > most {
        let want = format!("at most {most} (acknowledged + failed)");
        return Err(wrong("objects listed", names.len().to_string(), want));
    }
    Ok(format!(
        "{} acknowledged, {} distinct resourceVersions, {} listed",
        created.len(),
        versions.len(),
        names.len()
    ))
}
