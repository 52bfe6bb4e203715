//! Byte strings made of parts in one allocation: the values of a
//! response.

use hyper::body::Bytes;

/// Bytes owned inline, so that the values of a response cost one
/// allocation (the shared owner's), not one for the owner and one for
/// its buffer.
struct Inline {
    len: usize,
    buf: [u8; INLINE],
}

/// Room for the three changing values (at most 10 + 20 + 58 bytes and
/// the window's name) and a next `Link` with a base address of up to 48
/// bytes; longer ones go to the heap.
const INLINE: usize = 136;

impl AsRef<[u8]> for Inline {
    fn as_ref(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or_default()
    }
}

/// `parts` one after the other, in one allocation.
///
/// Why an array and `#[inline]`: inlined where its parts are known, the
/// loop is unrolled and a literal part (`";r="`) is copied by a store or
/// two of known size, not by a call to `memcpy`; and the length is not
/// summed in a pass of its own first (`scripts/bench/profile`).
#[inline]
pub(super) fn joined<const N: usize>(parts: [&[u8]; N]) -> Bytes {
    let mut inline = Inline {
        len: 0,
        buf: [0; INLINE],
    };
    for part in parts {
        let at = inline.len;
        let Some(to) = inline.buf.get_mut(at..at + part.len()) else {
            return Bytes::from(parts.concat());
        };
        to.copy_from_slice(part);
        inline.len = at + part.len();
    }
    Bytes::from_owner(inline)
}
