//! [`OrderId`]: orders are numbered 1, 2, 3, ... like pets, and written
//! in a URL the same one way.

use std::fmt;
use std::num::NonZeroU64;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::pet::{positive_int64, IdError};

/// The largest id the contract allows: ids are `int64`, so 2^63 - 1.
const MAX_ID: u64 = i64::MAX as u64;

positive_int64! {
    /// Identifier of an order: an `int64` from 1 to 2^63 - 1, assigned as
    /// 1, 2, 3, ... with no gap and never reused.
    ///
    /// # Examples
    ///
    /// ```
    /// use petstore_core::order::OrderId;
    /// assert_eq!("12".parse::<OrderId>().map(OrderId::get), Ok(12));
    /// assert!("012".parse::<OrderId>().is_err());
    /// ```
    OrderId
}
