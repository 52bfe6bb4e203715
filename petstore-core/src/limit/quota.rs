//! Rate-limit plans and quotas: what a key may do per minute and per day,
//! and when repeated refusals get it banned. Invalid numbers cannot be
//! built (`NonZeroU32`).

use std::num::NonZeroU32;
use std::str::FromStr;
use std::time::Duration;

use super::error::QuotaError;

/// Requests allowed per minute and per day.
///
/// # Examples
///
/// ```
/// use petstore_core::Quota;
/// let q = Quota::new(60, 1_000).unwrap();
/// assert_eq!((q.per_minute().get(), q.per_day().get()), (60, 1_000));
/// assert!(Quota::new(0, 10).is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Quota {
    per_minute: NonZeroU32,
    per_day: NonZeroU32,
}

impl Quota {
    /// A quota; fails when either number is zero.
    pub fn new(per_minute: u32, per_day: u32) -> Result<Quota, QuotaError> {
        Ok(Quota {
            per_minute: NonZeroU32::new(per_minute).ok_or(QuotaError::Zero)?,
            per_day: NonZeroU32::new(per_day).ok_or(QuotaError::Zero)?,
        })
    }

    /// A quota from numbers known to be positive.
    pub const fn from_nonzero(per_minute: NonZeroU32, per_day: NonZeroU32) -> Quota {
        Quota {
            per_minute,
            per_day,
        }
    }

    /// Requests per minute.
    pub const fn per_minute(self) -> NonZeroU32 {
        self.per_minute
    }

    /// Requests per day.
    pub const fn per_day(self) -> NonZeroU32 {
        self.per_day
    }
}

const fn nz(n: u32) -> NonZeroU32 {
    match NonZeroU32::new(n) {
        Some(n) => n,
        None => NonZeroU32::MIN,
    }
}

/// A plan of the specification's table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Plan {
    /// 60 per minute, 1,000 per day.
    Free,
    /// 300 per minute, 10,000 per day.
    Pro,
    /// 1,000 per minute, 100,000 per day.
    Business,
    /// Custom numbers, given per key.
    Enterprise,
}

impl Plan {
    /// Every plan.
    pub const ALL: [Plan; 4] = [Plan::Free, Plan::Pro, Plan::Business, Plan::Enterprise];

    /// The keys-file spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            Plan::Free => "free",
            Plan::Pro => "pro",
            Plan::Business => "business",
            Plan::Enterprise => "enterprise",
        }
    }
}

/// An unknown plan name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown plan `{0}`; plans are free, pro, business, enterprise")]
pub struct UnknownPlan(pub String);

impl FromStr for Plan {
    type Err = UnknownPlan;
    fn from_str(s: &str) -> Result<Plan, UnknownPlan> {
        Plan::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| UnknownPlan(s.to_owned()))
    }
}

/// The quota of each plan: the specification's numbers unless overridden.
///
/// # Examples
///
/// ```
/// use petstore_core::{Plan, Plans, Quota};
/// let mut plans = Plans::default();
/// assert_eq!(plans.quota(Plan::Pro, None).unwrap(), Quota::new(300, 10_000).unwrap());
/// assert!(plans.quota(Plan::Enterprise, None).is_err());
/// let custom = Quota::new(5_000, 2_000_000).unwrap();
/// assert_eq!(plans.quota(Plan::Enterprise, Some(custom)).unwrap(), custom);
/// plans.set(Plan::Free, Quota::new(10, 100).unwrap());
/// assert_eq!(plans.quota(Plan::Free, None).unwrap().per_minute().get(), 10);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plans {
    free: Quota,
    pro: Quota,
    business: Quota,
    enterprise: Option<Quota>,
}

impl Default for Plans {
    fn default() -> Self {
        Plans {
            free: Quota::from_nonzero(nz(60), nz(1_000)),
            pro: Quota::from_nonzero(nz(300), nz(10_000)),
            business: Quota::from_nonzero(nz(1_000), nz(100_000)),
            enterprise: None,
        }
    }
}

impl Plans {
    /// Overrides one plan's quota.
    pub fn set(&mut self, plan: Plan, quota: Quota) {
        match plan {
            Plan::Free => self.free = quota,
            Plan::Pro => self.pro = quota,
            Plan::Business => self.business = quota,
            Plan::Enterprise => self.enterprise = Some(quota),
        }
    }

    /// The quota of a key on `plan`; `custom` (a key's own numbers) wins.
    /// Fails for `enterprise` when neither gives numbers.
    pub fn quota(&self, plan: Plan, custom: Option<Quota>) -> Result<Quota, QuotaError> {
        if let Some(custom) = custom {
            return Ok(custom);
        }
        match plan {
            Plan::Free => Ok(self.free),
            Plan::Pro => Ok(self.pro),
            Plan::Business => Ok(self.business),
            Plan::Enterprise => self.enterprise.ok_or(QuotaError::MissingEnterpriseLimits),
        }
    }
}

/// When a key that keeps going past its limit is banned: after `strikes`
/// refusals within `window`, for `duration`.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use petstore_core::BanPolicy;
/// let ban = BanPolicy::default();
/// assert_eq!(ban.strikes().get(), 60);
/// assert_eq!(ban.window(), Duration::from_secs(60));
/// assert_eq!(ban.duration(), Duration::from_secs(600));
/// assert!(BanPolicy::new(0, 60, 600).is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BanPolicy {
    strikes: NonZeroU32,
    window: Duration,
    duration: Duration,
}

impl Default for BanPolicy {
    fn default() -> Self {
        BanPolicy {
            strikes: nz(60),
            window: Duration::from_secs(60),
            duration: Duration::from_secs(600),
        }
    }
}

impl BanPolicy {
    /// A policy; every number must be at least 1.
    pub fn new(strikes: u32, window_secs: u64, ban_secs: u64) -> Result<BanPolicy, QuotaError> {
        if window_secs == 0 || ban_secs == 0 {
            return Err(QuotaError::InvalidBan);
        }
        Ok(BanPolicy {
            strikes: NonZeroU32::new(strikes).ok_or(QuotaError::InvalidBan)?,
            window: Duration::from_secs(window_secs),
            duration: Duration::from_secs(ban_secs),
        })
    }

    /// Refusals that trigger a ban.
    pub const fn strikes(&self) -> NonZeroU32 {
        self.strikes
    }

    /// The window the refusals are counted in.
    pub const fn window(&self) -> Duration {
        self.window
    }

    /// How long a ban lasts.
    pub const fn duration(&self) -> Duration {
        self.duration
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_names_round_trip_and_nothing_else_is_a_plan() {
        let names: Vec<&str> = Plan::ALL.iter().map(|p| p.as_str()).collect();
        assert_eq!(names, ["free", "pro", "business", "enterprise"]);
        for plan in Plan::ALL {
            assert_eq!(plan.as_str().parse::<Plan>(), Ok(plan));
        }
        for other in ["gold", "Free", "", "pro "] {
            assert_eq!(
                other.parse::<Plan>(),
                Err(UnknownPlan(other.to_owned())),
                "{other:?}"
            );
        }
    }

    #[test]
    fn set_overrides_that_plan_alone() {
        let custom =
            Quota::new(7, 70).unwrap_or(Quota::from_nonzero(NonZeroU32::MIN, NonZeroU32::MIN));
        for plan in Plan::ALL {
            let mut plans = Plans::default();
            plans.set(plan, custom);
            assert_eq!(plans.quota(plan, None), Ok(custom), "{plan:?}");
            for other in Plan::ALL.into_iter().filter(|p| *p != plan) {
                assert_eq!(
                    plans.quota(other, None),
                    Plans::default().quota(other, None),
                    "{other:?} after setting {plan:?}"
                );
            }
        }
    }
}
