//! The one CEL environment every expression is compiled and evaluated
//! in: the standard library and cel-go's strings extension (kube's
//! `charAt`, `indexOf`, `lowerAscii`, `replace`, `split`, `substring`,
//! `trim`, `join`, `format`, ...). kube's list functions are added to
//! each evaluation's context (`kube_lists.rs`).

use std::sync::{Arc, OnceLock};

use cel::{extensions, Env};

/// Identifiers that name types (`type(x) == string`), not variables.
pub const TYPE_NAMES: &[&str] = &[
    "bool",
    "bytes",
    "double",
    "int",
    "list",
    "map",
    "null_type",
    "string",
    "type",
    "uint",
    "optional_type",
];

/// Function namespaces a call may be qualified with (`optional.of(x)`,
/// `strings.quote(s)`).
pub const NAMESPACES: &[&str] = &["optional", "strings"];

/// Built once: building an environment is not free.
pub fn shared() -> Arc<Env> {
    static ENV: OnceLock<Arc<Env>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Env::stdlib();
        env.add_extension(extensions::strings)
            .expect("the strings extension declares nothing the stdlib has");
        Arc::new(env)
    })
    .clone()
}
