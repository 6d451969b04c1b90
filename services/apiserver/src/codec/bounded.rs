//! Decoding a body into a JSON value that is bounded while it is built.
//!
//! YAML aliases let a few kilobytes stand for billions of values
//! ("billion laughs", kube's CVE-2019-11253). serde_yaml 0.9 caps how many
//! times aliases are followed (a hundred times the document's events) but
//! not what each one copies: a list of a thousand strings behind two levels
//! of thirty aliases is millions of values from a 20 KB body. So every
//! value is counted as it is made, and decoding stops once the values
//! made pass a small multiple of the body's size, before the rest exists.
//!
//! Depth is bounded too, to [`MAX_DEPTH`] (see [`crate::object::limits`]).

use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

use crate::object::limits::MAX_DEPTH;

/// Decoded values may weigh this many times the body, plus [`SLACK`]:
/// room for anchors used as kube manifests use them, never for an
/// expansion that multiplies.
pub const EXPANSION: usize = 8;

/// What any body may decode to besides [`EXPANSION`] times its size (a
/// short document holds more values than bytes: `[1,2,3]`).
const SLACK: usize = 64 * 1024;

/// Why a decode stopped.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Limit {
    /// The values made weigh more than allowed for the body's size.
    Expansion { allowed: usize, body: usize },
    /// A list or object nested deeper than [`MAX_DEPTH`].
    Depth,
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Limit::Expansion { allowed, body } => write!(
                f,
                "the document's aliases expand past {allowed} bytes of values, \
                 {EXPANSION} times its {body} bytes (document contains excessive aliasing)"
            ),
            Limit::Depth => write!(f, "the object is nested more than {MAX_DEPTH} levels deep"),
        }
    }
}

/// What is left to spend while decoding one body; records the limit
/// passed, so the caller reports it rather than the decoder's wrapping.
pub struct Allowance {
    left: Cell<usize>,
    allowed: usize,
    body: usize,
    passed: Cell<Option<Limit>>,
}

impl Allowance {
    pub fn for_body(body: usize) -> Allowance {
        let allowed = body.saturating_mul(EXPANSION).saturating_add(SLACK);
        Allowance {
            left: Cell::new(allowed),
            allowed,
            body,
            passed: Cell::new(None),
        }
    }

    /// The limit passed, if decoding stopped at one.
    pub fn passed(&self) -> Option<Limit> {
        self.passed.get()
    }

    /// The seed that decodes the top value.
    pub fn seed(&self) -> Bounded<'_> {
        Bounded {
            allowance: self,
            depth: 0,
        }
    }

    /// Takes `weight` (a value's own bytes, at least one).
    fn spend<E: de::Error>(&self, weight: usize) -> Result<(), E> {
        let weight = weight.max(1);
        match self.left.get().checked_sub(weight) {
            Some(left) => {
                self.left.set(left);
                Ok(())
            }
            None => self.stop(Limit::Expansion {
                allowed: self.allowed,
                body: self.body,
            }),
        }
    }

    fn stop<T, E: de::Error>(&self, limit: Limit) -> Result<T, E> {
        self.passed.set(Some(limit));
        Err(E::custom(limit))
    }
}

/// Decodes one value at `depth`, spending from the allowance.
#[derive(Clone, Copy)]
pub struct Bounded<'a> {
    allowance: &'a Allowance,
    depth: usize,
}

impl Bounded<'_> {
    fn nested<E: de::Error>(self) -> Result<Self, E> {
        if self.depth >= MAX_DEPTH {
            return self.allowance.stop(Limit::Depth);
        }
        Ok(Bounded {
            allowance: self.allowance,
            depth: self.depth + 1,
        })
    }
}

impl<'de> DeserializeSeed<'de> for Bounded<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Bounded<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        self.allowance.spend(1)?;
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        self.allowance.spend(8)?;
        Ok(Value::from(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        self.allowance.spend(8)?;
        Ok(Value::from(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        self.allowance.spend(8)?;
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        self.allowance.spend(v.len())?;
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        self.allowance.spend(v.len())?;
        Ok(Value::String(v))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        self.allowance.spend(1)?;
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        self.visit_unit()
    }

    fn visit_some<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        self.deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let inner = self.nested()?;
        self.allowance.spend(1)?;
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(inner)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let inner = self.nested()?;
        self.allowance.spend(1)?;
        let mut members = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            self.allowance.spend(key.len())?;
            let value = map.next_value_seed(inner)?;
            members.insert(key, value);
        }
        Ok(Value::Object(members))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::limits::depth;
    use serde_json::json;

    fn decode_yaml(text: &str) -> Result<Value, Option<Limit>> {
        let allowance = Allowance::for_body(text.len());
        let decoder = serde_yaml::Deserializer::from_str(text);
        allowance
            .seed()
            .deserialize(decoder)
            .map_err(|_| allowance.passed())
    }

    /// The classic: nine levels of ten aliases, a billion "lol"s in 900
    /// bytes. serde_yaml alone refuses it only after following aliases
    /// a hundred times per event; here it stops after a few thousand
    /// values.
    #[test]
    fn a_billion_laughs_stops_early() {
        let mut text = String::from("a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n");
        let names = ["a", "b", "c", "d", "e", "f", "g", "h", "i"];
        for pair in names.windows(2) {
            let refs = vec![format!("*{}", pair[0]); 10].join(",");
            text.push_str(&format!("{}: &{} [{refs}]\n", pair[1], pair[1]));
        }
        let started = std::time::Instant::now();
        let stopped = decode_yaml(&text).unwrap_err();
        assert!(
            matches!(stopped, Some(Limit::Expansion { .. })),
            "{stopped:?}"
        );
        // Untimed bound, for the record: the whole expansion would take
        // minutes and gigabytes.
        eprintln!("refused in {:?}", started.elapsed());
    }

    /// What serde_yaml lets through: many values behind few alias uses.
    #[test]
    fn wide_anchors_behind_few_aliases_stop_too() {
        let strings = vec!["\"0123456789abcdef\""; 1000].join(", ");
        let thirty = |name: &str| vec![format!("*{name}"); 30].join(", ");
        let text = format!(
            "a: &a [{strings}]\nb: &b [{}]\nc: [{}]\n",
            thirty("a"),
            thirty("b")
        );
        let stopped = decode_yaml(&text).unwrap_err();
        assert!(matches!(stopped, Some(Limit::Expansion { .. })));
    }

    #[test]
    fn anchors_used_as_manifests_use_them_decode() {
        let text = "base: &base {app: web, tier: front}\nlabels: *base\nselector: *base\n";
        let value = decode_yaml(text).unwrap();
        assert_eq!(value["selector"], json!({"app": "web", "tier": "front"}));
    }

    #[test]
    fn nesting_is_bounded() {
        let fits = format!("{}1{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert_eq!(depth(&decode_yaml(&fits).unwrap()), MAX_DEPTH);
        let deeper = format!(
            "{}1{}",
            "[".repeat(MAX_DEPTH + 1),
            "]".repeat(MAX_DEPTH + 1)
        );
        assert_eq!(decode_yaml(&deeper).unwrap_err(), Some(Limit::Depth));
    }
}
