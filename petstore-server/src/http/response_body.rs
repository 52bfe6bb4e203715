//! [`ResponseBody`]: the body of every response. Whole for every answer
//! but one: a stream of events (beta, `Accept: text/event-stream`), whose
//! bytes come from the task that follows the feed (`store/feed.rs`) as
//! they are made.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use http_body_util::Full;
use hyper::body::{Body, Bytes, Frame, SizeHint};
use tokio::sync::mpsc;

/// A response's body.
#[derive(Debug)]
pub enum ResponseBody {
    /// All of it, known when the response is made.
    Full(Full<Bytes>),
    /// A stream, each chunk sent as it comes, until its sender ends.
    Stream(mpsc::Receiver<Bytes>),
}

impl ResponseBody {
    /// A whole body.
    pub fn full(bytes: impl Into<Bytes>) -> Self {
        ResponseBody::Full(Full::new(bytes.into()))
    }
}

impl Default for ResponseBody {
    fn default() -> Self {
        ResponseBody::Full(Full::default())
    }
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            ResponseBody::Full(full) => Pin::new(full).poll_frame(cx),
            ResponseBody::Stream(chunks) => chunks
                .poll_recv(cx)
                .map(|chunk| chunk.map(|bytes| Ok(Frame::data(bytes)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ResponseBody::Full(full) => full.is_end_stream(),
            ResponseBody::Stream(_) => false,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ResponseBody::Full(full) => full.size_hint(),
            ResponseBody::Stream(_) => SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Waker;

    #[test]
    fn a_stream_gives_each_chunk_then_ends_with_its_sender() {
        let (tx, rx) = mpsc::channel(2);
        let mut body = ResponseBody::Stream(rx);
        assert_eq!(body.size_hint().exact(), None);
        tx.try_send(Bytes::from_static(b"one")).unwrap();
        let mut cx = Context::from_waker(Waker::noop());
        let frame = Pin::new(&mut body).poll_frame(&mut cx);
        assert!(
            matches!(frame, Poll::Ready(Some(Ok(ref f))) if f.data_ref().is_some_and(|d| d == "one"))
        );
        assert!(Pin::new(&mut body).poll_frame(&mut cx).is_pending());
        drop(tx);
        assert!(matches!(
            Pin::new(&mut body).poll_frame(&mut cx),
            Poll::Ready(None)
        ));
    }
}
