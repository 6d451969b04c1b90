//! A response body that reports when it ends: the ResponseComplete event
//! of a streamed answer (a watch, a large list) is written when its body
//! is finished or dropped (the client went away), with what went through
//! when the answer is to be recorded.

use std::pin::Pin;
use std::task::{Context, Poll};

use actix_web::body::{BodySize, BoxBody, MessageBody};
use bytes::{Bytes, BytesMut};

/// Past this many bytes a streamed answer is not kept for the record.
const KEEP_AT_MOST: usize = 8 * 1024 * 1024;

pub struct Reported<F: FnOnce(Option<Bytes>)> {
    inner: BoxBody,
    kept: Option<BytesMut>,
    on_end: Option<F>,
}

impl<F: FnOnce(Option<Bytes>) + Unpin> Reported<F> {
    /// `keep`: whether the bytes that go through are handed to `on_end`.
    pub fn new(inner: BoxBody, keep: bool, on_end: F) -> Reported<F> {
        Reported {
            inner,
            kept: keep.then(BytesMut::new),
            on_end: Some(on_end),
        }
    }
}

impl<F: FnOnce(Option<Bytes>) + Unpin> MessageBody for Reported<F> {
    type Error = Box<dyn std::error::Error>;

    fn size(&self) -> BodySize {
        self.inner.size()
    }

    fn poll_next(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Bytes, Self::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_next(cx);
        if let (Poll::Ready(Some(Ok(chunk))), Some(kept)) = (&polled, &mut this.kept) {
            match kept.len() + chunk.len() > KEEP_AT_MOST {
                true => this.kept = None,
                false => kept.extend_from_slice(chunk),
            }
        }
        polled
    }
}

impl<F: FnOnce(Option<Bytes>)> Drop for Reported<F> {
    fn drop(&mut self) {
        if let Some(on_end) = self.on_end.take() {
            on_end(self.kept.take().map(BytesMut::freeze));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[actix_rt::test]
    async fn reports_what_went_through_when_dropped() {
        let seen = Arc::new(Mutex::new(None));
        let into = seen.clone();
        let body = Reported::new(BoxBody::new("{\"a\":1}"), true, move |bytes| {
            *into.lock().unwrap() = Some(bytes);
        });
        let bytes = actix_web::body::to_bytes(body).await.unwrap();
        assert_eq!(&bytes[..], b"{\"a\":1}");
        let reported = seen.lock().unwrap().take().unwrap().unwrap();
        assert_eq!(&reported[..], b"{\"a\":1}");
    }
}
