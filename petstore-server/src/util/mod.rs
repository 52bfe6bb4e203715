//! Plain helpers with no knowledge of the service: reused buffers,
//! interned strings, reading an operator's file safely, hex digests,
//! constant-time equality, a hash mixer, calendar dates.
//!
//! May use: nothing.

pub mod buffers;
pub mod file_read;
pub mod hex;
pub mod intern;
pub mod mix;
pub mod same_bytes;
