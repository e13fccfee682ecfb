//! The counter-based hash RNGs that hmc and ising evaluate inside their
//! kernels. They are part of those tasks' contracts and must be reproduced
//! bit for bit, so the CPU references use exactly these functions.

/// 2^32 / golden ratio: the per-chain / per-step key increment.
pub const GOLDEN: u32 = 0x9E37_79B9;

/// The Murmur3 32-bit finaliser.
pub fn fmix32(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x85EB_CA6B);
    x ^= x >> 13;
    x = x.wrapping_mul(0xC2B2_AE35);
    x ^= x >> 16;
    x
}

/// A 24-bit uniform in [0, 1), exact in f32.
pub fn unit(bits: u32) -> f32 {
    (bits >> 8) as f32 * (1.0 / 16_777_216.0)
}

/// hmc: key = seed + chain * GOLDEN; bits = fmix32(fmix32(key ^ ctr)).
pub fn hmc_bits(seed: u32, chain: u32, ctr: u32) -> u32 {
    let key = seed.wrapping_add(chain.wrapping_mul(GOLDEN));
    fmix32(fmix32(key ^ ctr))
}

pub fn hmc_uniform(seed: u32, chain: u32, ctr: u32) -> f32 {
    unit(hmc_bits(seed, chain, ctr))
}

/// ising: key = seed + step * GOLDEN; bits = fmix32(fmix32(key) ^ site).
/// The first mix happens before the site is XORed in (unlike hmc).
pub fn ising_bits(seed: u32, step: u32, site: u32) -> u32 {
    fmix32(ising_mixed_key(seed, step) ^ site)
}

/// fmix32(seed + step * GOLDEN): the part of the ising hash shared by every
/// site of a sub-pass.
pub fn ising_mixed_key(seed: u32, step: u32) -> u32 {
    fmix32(seed.wrapping_add(step.wrapping_mul(GOLDEN)))
}

pub fn ising_uniform(seed: u32, step: u32, site: u32) -> f32 {
    unit(ising_bits(seed, step, site))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f32, b: f64) -> bool {
        (a as f64 - b).abs() < 5e-9
    }

    #[test]
    fn fmix32_matches_murmur3() {
        assert_eq!(fmix32(0), 0);
        assert_eq!(fmix32(1), 0x514E_28B7);
    }

    #[test]
    fn hmc_test_vectors() {
        let seed = 0xCAFE_BEEF;
        for (chain, ctr, bits, u) in [
            (0, 0, 0xCF86_97BB, 0.810_647_43_f64),
            (1, 0, 0x535F_D1E3, 0.325_680_79),
            (0, 1, 0xDB1C_A5AE, 0.855_905_83),
            (7, 1000, 0xE7FE_D1E5, 0.906_231_94),
        ] {
            assert_eq!(hmc_bits(seed, chain, ctr), bits, "({chain}, {ctr})");
            assert!(close(hmc_uniform(seed, chain, ctr), u), "({chain}, {ctr})");
        }
    }

    #[test]
    fn ising_test_vectors() {
        let seed = 0xC0FF_EE01;
        for (step, site, bits, u) in [
            (0, 0, 0xBA93_6299, 0.728_811_38_f64),
            (0, 1, 0x2D34_D74E, 0.176_587_52),
            (1, 0, 0x669C_5833, 0.400_823_12),
            (5, 123, 0x812B_FEA0, 0.504_577_52),
        ] {
            assert_eq!(ising_bits(seed, step, site), bits, "({step}, {site})");
            assert!(
                close(ising_uniform(seed, step, site), u),
                "({step}, {site})"
            );
        }
    }

    #[test]
    fn uniforms_are_exact_24_bit_fractions() {
        assert_eq!(unit(0), 0.0);
        assert_eq!(unit(0xFF), 0.0);
        assert_eq!(unit(0x100), 1.0 / 16_777_216.0);
        assert!(unit(u32::MAX) < 1.0);
        assert_eq!(unit(u32::MAX), 16_777_215.0 / 16_777_216.0);
    }
}
