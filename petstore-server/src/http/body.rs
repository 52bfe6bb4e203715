//! What the network layer read of a request's body, and its cap.

use std::time::Duration;

use hyper::body::Bytes;

/// Most bytes a request body may have (docs/contract.md, "Errors": 64 KiB).
pub const MAX_BODY: usize = 64 * 1024;

/// What the server layer managed to read of the request body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BodyRead {
    /// The whole body (possibly empty).
    Complete(Bytes),
    /// Over [`MAX_BODY`]; not read (or not to the end).
    TooLarge,
    /// Did not arrive within the body timeout, which is given (the 408
    /// says it).
    TimedOut(Duration),
    /// The body ended with a trailer section (HTTP/1.1 chunked trailer
    /// fields, an HTTP/2 HEADERS frame after the data, even an empty
    /// one): no operation takes trailers, and a field there (an HTTP/2
    /// pseudo-header among them, which makes the request malformed) may
    /// say something the request's head did not.
    Trailers,
    /// The connection broke or the framing was invalid.
    Broken,
}
