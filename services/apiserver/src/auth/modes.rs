//! `--authorization-mode`: which authorizers a server asks, in order.

/// One `--authorization-mode` entry.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mode {
    AlwaysAllow,
    AlwaysDeny,
    Node,
    Rbac,
}

/// A comma list of kube's mode names; `ABAC` and `Webhook` are kube's
/// too but not served here.
pub fn parse_modes(text: &str) -> Result<Vec<Mode>, String> {
    let mut modes = Vec::new();
    for name in text.split(',').map(str::trim).filter(|m| !m.is_empty()) {
        let mode = match name {
            "AlwaysAllow" => Mode::AlwaysAllow,
            "AlwaysDeny" => Mode::AlwaysDeny,
            "RBAC" => Mode::Rbac,
            "Node" => Mode::Node,
            "ABAC" | "Webhook" => {
                return Err(format!(
                    "authorization mode {name:?} is not supported by capstan"
                ))
            }
            other => return Err(format!("unknown authorization mode {other:?}")),
        };
        if modes.contains(&mode) {
            return Err(format!("authorization mode {name:?} is given twice"));
        }
        modes.push(mode);
    }
    if modes.is_empty() {
        return Err("at least one authorization mode is needed".into());
    }
    Ok(modes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_as_kube_names_them() {
        assert_eq!(
            parse_modes("RBAC, AlwaysAllow").unwrap(),
            [Mode::Rbac, Mode::AlwaysAllow]
        );
        assert_eq!(parse_modes("Node,RBAC").unwrap(), [Mode::Node, Mode::Rbac]);
        assert!(parse_modes("Webhook")
            .unwrap_err()
            .contains("not supported"));
        assert!(parse_modes("").is_err());
        assert!(parse_modes("RBAC,RBAC").is_err());
    }
}
