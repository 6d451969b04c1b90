//! A JSON list answered straight from the watch cache's shared objects:
//! the cached texts are written into the response in chunks of about
//! [`CHUNK`] bytes as the connection takes them, with the exact length
//! announced first. A list of 10,000 objects (6 MB) is then never a
//! buffer of its own: built whole, it was one allocation per list that
//! glibc kept resident afterwards, and the copy took longer than the
//! chunks do.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use actix_web::body::{BodySize, MessageBody};
use actix_web::HttpResponse;
use bytes::{Bytes, BytesMut};
use serde_json::Value;

use crate::storage::Object;

/// About how much of the list one chunk carries.
const CHUNK: usize = 64 * 1024;

const TAIL: &[u8] = b"]}";

/// `{"kind":…,"apiVersion":…,"metadata":…,"items":[…]}` with the items'
/// texts as the cache holds them.
pub struct JsonList {
    head: Option<Bytes>,
    items: Vec<Arc<Object>>,
    next: usize,
    size: u64,
}

impl JsonList {
    pub fn new(kind: &str, api_version: &str, metadata: &Value, items: Vec<Arc<Object>>) -> Self {
        let head = format!(
            "{{\"kind\":{},\"apiVersion\":{},\"metadata\":{},\"items\":[",
            Value::from(kind),
            Value::from(api_version),
            metadata
        );
        let texts: usize = items.iter().map(|o| o.json().get().len()).sum();
        let commas = items.len().saturating_sub(1);
        let size = (head.len() + texts + commas + TAIL.len()) as u64;
        JsonList {
            head: Some(Bytes::from(head)),
            items,
            next: 0,
            size,
        }
    }

    pub fn respond(self) -> HttpResponse {
        HttpResponse::Ok()
            .content_type("application/json")
            .body(self)
    }

    /// The next chunk: the head first, then items up to about CHUNK bytes,
    /// the tail after the last one.
    fn chunk(&mut self) -> Option<Bytes> {
        if let Some(head) = self.head.take() {
            return Some(head);
        }
        if self.next > self.items.len() {
            return None;
        }
        let mut out = BytesMut::with_capacity(CHUNK + 4096);
        while self.next < self.items.len() && out.len() < CHUNK {
            if self.next > 0 {
                out.extend_from_slice(b",");
            }
            out.extend_from_slice(self.items[self.next].json().get().as_bytes());
            self.next += 1;
        }
        if self.next == self.items.len() {
            out.extend_from_slice(TAIL);
            self.next += 1;
        }
        Some(out.freeze())
    }
}

impl MessageBody for JsonList {
    type Error = std::convert::Infallible;

    fn size(&self) -> BodySize {
        BodySize::Sized(self.size)
    }

    fn poll_next(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Bytes, Self::Error>>> {
        Poll::Ready(self.get_mut().chunk().map(Ok))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn drain(mut list: JsonList) -> (u64, Vec<u8>) {
        let size = list.size;
        let mut all = Vec::new();
        while let Some(chunk) = list.chunk() {
            all.extend_from_slice(&chunk);
        }
        (size, all)
    }

    fn object(i: usize) -> Arc<Object> {
        let name = format!("item-{i}");
        let value = json!({"kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v".repeat(300)}});
        Arc::new(Object::new(
            &format!("/registry/configmaps/ns/{name}"),
            value,
            5,
            &[],
        ))
    }

    #[test]
    fn the_chunks_make_the_list_and_its_announced_length() {
        for count in [0, 1, 2, 500] {
            let items: Vec<_> = (0..count).map(object).collect();
            let list = JsonList::new(
                "ConfigMapList",
                "v1",
                &json!({"resourceVersion": "9"}),
                items,
            );
            let (size, text) = drain(list);
            assert_eq!(size as usize, text.len());
            let parsed: Value = serde_json::from_slice(&text).expect("valid JSON");
            assert_eq!(parsed["kind"], "ConfigMapList");
            assert_eq!(parsed["metadata"]["resourceVersion"], "9");
            let names: Vec<_> = parsed["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| o["metadata"]["name"].clone())
                .collect();
            let want: Vec<_> = (0..count).map(|i| json!(format!("item-{i}"))).collect();
            assert_eq!(names, want);
        }
    }

    #[test]
    fn a_long_list_comes_in_several_chunks() {
        let items: Vec<_> = (0..1000).map(object).collect();
        let mut list = JsonList::new("ConfigMapList", "v1", &json!({}), items);
        let mut chunks = 0;
        while let Some(chunk) = list.chunk() {
            assert!(chunk.len() <= CHUNK + 4096);
            chunks += 1;
        }
        assert!(chunks > 3, "{chunks} chunks");
    }
}
