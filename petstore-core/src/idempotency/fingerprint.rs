//! [`Fingerprint`]: what identifies the request a key was first sent
//! with, so that the same key with another request is told apart.

use std::fmt;

/// A digest of a request (its method, path and body, by bytes), made by
/// the caller: the core only compares two. The server makes it with
/// SHA-256; an embedding program may use any 32-byte digest, as long as
/// it uses one.
///
/// # Examples
///
/// ```
/// use petstore_core::idempotency::Fingerprint;
/// let a = Fingerprint::from_bytes([7; 32]);
/// assert_eq!(a, Fingerprint::from_hex(&a.to_hex()).unwrap());
/// assert_ne!(a, Fingerprint::from_bytes([8; 32]));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint([u8; 32]);

impl Fingerprint {
    /// The fingerprint of these 32 bytes.
    pub const fn from_bytes(bytes: [u8; 32]) -> Self {
        Fingerprint(bytes)
    }

    /// Its 32 bytes.
    pub const fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// 64 lowercase hex digits, as a journal record holds it.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// From 64 hex digits; `None` for anything else.
    pub fn from_hex(hex: &str) -> Option<Self> {
        if hex.len() != 64 || !hex.is_ascii() {
            return None;
        }
        let mut bytes = [0u8; 32];
        for (i, byte) in bytes.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
        }
        Some(Fingerprint(bytes))
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({})", &self.to_hex()[..16])
    }
}
