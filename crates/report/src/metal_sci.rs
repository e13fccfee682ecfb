//! Metal-Sci's published results on the Apple M1 Pro (200 GB/s, 4,500
//! GFLOPS), the figures a kevo winner's fraction of its own roofline is
//! set beside. Both are the best of the paper's three models (Opus 4.7,
//! Gemini 3.1 Pro, GPT-5.5): the in-distribution score is the geometric
//! mean of the fractions over the task's sizes (the canonical runs'
//! summary.json), the held-out figure the fraction at the held-out size
//! (three_held_out.json, one session; morton and adi3d from the
//! repository's README, which has no JSON for them).

/// One task's best figures on the M1 Pro.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct M1Best {
    pub task: &'static str,
    /// Geometric mean of the fractions over the task's in-distribution
    /// sizes.
    pub in_distribution: f64,
    /// Fraction at the held-out size.
    pub held_out: f64,
}

/// In the order of Metal-Sci's Table 3.
pub const M1_BEST: [M1Best; 12] = [
    best("saxpy", 1.0808, 0.9273),
    best("heat2d", 0.6883, 0.9788),
    best("wave3d", 0.6808, 0.9701),
    best("nbody", 0.0550, 0.0199),
    best("hmc", 0.0932, 0.1024),
    best("lbm", 0.5764, 0.9316),
    best("ising", 0.0982, 0.1170),
    best("lj", 0.0056, 0.0047),
    best("gradshaf", 0.0664, 0.0772),
    best("fft3d", 0.4442, 0.4488),
    best("adi3d", 0.4802, 0.335),
    best("morton", 0.4825, 0.90),
];

const fn best(task: &'static str, in_distribution: f64, held_out: f64) -> M1Best {
    M1Best {
        task,
        in_distribution,
        held_out,
    }
}

/// The M1 Pro's best figures for a task of that name, if Metal-Sci ran it.
pub fn m1_best(task: &str) -> Option<M1Best> {
    M1_BEST.iter().copied().find(|b| b.task == task)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_metal_sci_task_has_one_entry_and_a_fraction_in_range() {
        let mut names: Vec<&str> = M1_BEST.iter().map(|b| b.task).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), 12);
        assert!(
            M1_BEST.iter().all(
                |b| (0.0..1.2).contains(&b.in_distribution) && (0.0..1.0).contains(&b.held_out)
            )
        );
        assert_eq!(m1_best("lbm").map(|b| b.held_out), Some(0.9316));
        assert_eq!(m1_best("conv2d"), None);
    }
}
