//! [`same_bytes`]: equality of two secrets' bytes in constant time.

use subtle::ConstantTimeEq;

/// Constant-time equality of two header values (their lengths are not
/// secret). The differences are OR-ed together a word at a time, without
/// a branch on the data, and the one comparison at the end goes through
/// `subtle` (its optimisation barrier keeps the compiler from turning the
/// whole into an early exit). Why not a barrier per byte (`subtle`'s own
/// slice comparison) or per word: each barrier is an opaque step the
/// compiler cannot merge, so their cost grows with the value's length
/// (`scripts/bench/profile`); one barrier costs the same for any length.
pub fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let (a_words, a_tail) = a.as_chunks::<8>();
    let (b_words, b_tail) = b.as_chunks::<8>();
    let words = a_words.iter().zip(b_words).fold(0u64, |diff, (x, y)| {
        diff | (u64::from_ne_bytes(*x) ^ u64::from_ne_bytes(*y))
    });
    let diff = a_tail
        .iter()
        .zip(b_tail)
        .fold(words, |diff, (x, y)| diff | u64::from(x ^ y));
    bool::from(diff.ct_eq(&0))
}

#[cfg(test)]
mod tests {
    use super::same_bytes;

    #[test]
    fn equal_only_when_every_byte_is() {
        let a = b"Bearer ps_0123456789abcdef0123456789abcdef";
        assert!(same_bytes(a, a));
        for i in 0..a.len() {
            let mut b = *a;
            b[i] ^= 1;
            assert!(!same_bytes(a, &b), "byte {i}");
        }
        assert!(!same_bytes(a, &a[..a.len() - 1]));
        assert!(same_bytes(b"", b""));
    }

    #[test]
    fn same_bytes_is_equality() {
        let keys: [&[u8]; 7] = [
            b"",
            b"a",
            b"b",
            b"abcdefgh",
            b"abcdefgi",
            b"abcdefghi",
            b"abcdefghj",
        ];
        for a in keys {
            for b in keys {
                assert_eq!(same_bytes(a, b), a == b, "{a:?} {b:?}");
            }
        }
    }
}
