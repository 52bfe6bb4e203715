//! [`mix64`]: a 64-bit value's bits mixed, for the slot of a small
//! direct-mapped table.

/// `x` mixed by splitmix64's finalizer (Steele, Lea and Flood): every bit
/// of the result depends on every bit of `x`. Why not a multiplication
/// alone: some tables' inputs (heap addresses, IP addresses) are aligned
/// or come in strides, which a lone multiplication spread over half the
/// slots. Not a defence against chosen inputs: a table that uses it must
/// be a cache that forgets, where a collision only costs a miss.
pub fn mix64(x: u64) -> u64 {
    let mut z = x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_inputs_in_strides_spread_over_the_low_bits() {
        let slots: std::collections::HashSet<u64> = (0..4096u64)
            .map(|i| mix64(0x5555_0000 + 32 * i) & 1023)
            .collect();
        assert!(slots.len() > 1000, "{} of 1,024 slots", slots.len());
        assert_eq!(mix64(0), 0);
        assert_ne!(mix64(1), 1);
    }
}
