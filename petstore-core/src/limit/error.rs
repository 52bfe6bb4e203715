//! The rate limiter's typed error: a configuration that cannot work.

/// A rate-limit configuration that cannot work.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QuotaError {
    /// A limit of zero requests.
    #[error("a rate limit must allow at least one request")]
    Zero,
    /// The enterprise plan has no default numbers.
    #[error("plan `enterprise` needs perMinute and perDay")]
    MissingEnterpriseLimits,
    /// A ban policy with a zero count or duration.
    #[error("ban strikes, windowSeconds and banSeconds must be at least 1")]
    InvalidBan,
}
